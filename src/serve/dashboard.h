// The live dashboard page served at GET / (src/serve/dashboard.html: HTML, CSS and JS in one file,
// nothing fetched from elsewhere). It polls GET /stats once a second. CMake embeds the file as a
// raw string literal (cmake/embed_text.cmake), so the binary needs no file at run time.
#pragma once
#include <string_view>

namespace dspark::serve {

// The page, UTF-8 HTML; valid for the life of the program.
std::string_view dashboard_html();

}  // namespace dspark::serve
