#include "viz/ui/image.hpp"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include "engine/scenario/error.hpp"

namespace stratagem::viz {

Rgba Image::at(int x, int y) const {
  const std::size_t i = (static_cast<std::size_t>(y) * width + x) * 4;
  return {rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3]};
}

void write_png(const Image& image, const std::string& path) {
  if (!stbi_write_png(path.c_str(), image.width, image.height, 4, image.rgba.data(),
                      image.width * 4)) {
    throw RuntimeError("cannot write " + path);
  }
}

Image read_png(const std::string& path) {
  int w = 0, h = 0, channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &w, &h, &channels, 4);
  if (!data) throw RuntimeError("cannot read " + path + ": " + stbi_failure_reason());
  Image img;
  img.width = w;
  img.height = h;
  img.rgba.assign(data, data + static_cast<std::size_t>(w) * h * 4);
  stbi_image_free(data);
  return img;
}

}  // namespace stratagem::viz
