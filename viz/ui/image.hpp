#pragma once
// RGBA images for screenshots: written with stb_image_write, read back with stb_image (the
// screenshot tests check pixels of what the viewer wrote).
#include <cstdint>
#include <string>
#include <vector>

#include "viz/model/colors.hpp"

namespace stratagem::viz {

struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgba;  ///< rows top to bottom, 4 bytes per pixel
  Rgba at(int x, int y) const;
};

/// Throws RuntimeError when the file cannot be written or read.
void write_png(const Image& image, const std::string& path);
Image read_png(const std::string& path);

}  // namespace stratagem::viz
