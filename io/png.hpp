#pragma once
// PNG writer: 8-bit RGB (colour type 2), no interlace, every row with filter type 0; the pixel
// stream is deflated with zlib. Enough for the plots `shardft plot` draws; no reader.
#include <cstdint>
#include <string>
#include <vector>

namespace shardft {

// The whole file: signature, IHDR, one IDAT, IEND. `rgb` holds width*height*3 bytes, rows top to bottom.
std::vector<std::uint8_t> encode_png_rgb(int width, int height, const std::vector<std::uint8_t>& rgb);

// encode_png_rgb written to `path` (through a temporary file renamed into place); throws naming the path.
void write_png_rgb(const std::string& path, int width, int height, const std::vector<std::uint8_t>& rgb);

}  // namespace shardft
