// Getting the EN-DE corpus's Debian files: packages by `apt-get download` (never installed) and
// unpacked by `dpkg-deb -x`, the DDTP translations by `apt-get update` into a private list folder
// (the system's apt state untouched). Everything is kept under one folder, so a second run
// downloads nothing, and a step cut short is redone, never used half-done.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ctgrad::data::ende {

using Log = std::function<void(const std::string&)>;

// $CTGRAD_DATA/ende, CTGRAD_DATA defaulting to /var/cache/ctgrad (as for the other data sets).
std::filesystem::path ende_dir();

struct DdtpFiles {
  std::filesystem::path en, de;  // Translation-en, Translation-de of the configured sources' main component
};
DdtpFiles fetch_ddtp(const std::filesystem::path& dir, const Log& log);

// The unpacked file tree of package `name` (dir/unpacked/<name>). A name that is not a Debian
// package name, or a package apt cannot get, is a data_error saying so.
std::filesystem::path fetch_package(const std::filesystem::path& dir, const std::string& name, const Log& log);

// The packages that ship a German gettext catalogue (usr/share/locale/de/LC_MESSAGES/*.mo), from
// the archive's Contents indices (fetched by apt-get update into the private list folder), sorted.
std::vector<std::string> packages_with_german_catalogues(const std::filesystem::path& dir, const Log& log);

// The German catalogues of each package, only those, in dir/catalogues/<package>/ (downloaded in
// batches, each .deb removed once its catalogues are out: the cache keeps megabytes, not the
// packages' gigabytes). Returns the folders of the packages that could be had, and logs the rest.
std::vector<std::pair<std::string, std::filesystem::path>> fetch_catalogues(const std::filesystem::path& dir, const std::vector<std::string>& packages,
                                                                            const Log& log);

}  // namespace ctgrad::data::ende
