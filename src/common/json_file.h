// Reading and writing whole JSON files, with one-line errors that name the file.
#pragma once
#include <filesystem>

#include <nlohmann/json.hpp>

namespace dspark {

// Throws dspark::Error "<path>: cannot open (...)" or "<path>: not valid JSON: ...".
nlohmann::json read_json_file(const std::filesystem::path& path);
// Pretty-printed (2 spaces) with a trailing newline; throws "<path>: cannot open for writing (...)" or
// "<path>: write failed".
void write_json_file(const std::filesystem::path& path, const nlohmann::json& json);

}  // namespace dspark
