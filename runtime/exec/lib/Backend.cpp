//===- Backend.cpp - Backends by name -------------------------------------===//

#include "smprt/exec/BackendRegistry.h"

#include <cstdlib>

namespace smprt {

void BackendRegistry::add(const std::string &name, bool takesDevice,
                          BackendFactory factory) {
  if (find(name))
    return;
  Entry e;
  e.name = name;
  e.takesDevice = takesDevice;
  e.factory = std::move(factory);
  entries_.push_back(std::move(e));
}

void BackendRegistry::addMissing(const std::string &name,
                                 const std::string &title, bool takesDevice,
                                 const std::string &why) {
  if (find(name))
    return;
  Entry e;
  e.name = name;
  e.takesDevice = takesDevice;
  e.title = title;
  e.why = why;
  entries_.push_back(std::move(e));
}

const BackendRegistry::Entry *
BackendRegistry::find(const std::string &name) const {
  for (const Entry &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> out;
  for (const Entry &e : entries_)
    if (e.factory)
      out.push_back(e.name);
  return out;
}

bool BackendRegistry::has(const std::string &name) const {
  const Entry *e = find(name);
  return e && e->factory;
}

std::string BackendRegistry::accepted() const {
  std::vector<std::string> forms;
  for (const Entry &e : entries_) {
    forms.push_back(e.name);
    if (e.takesDevice)
      forms.push_back(e.name + ":N");
  }
  std::string out;
  for (size_t i = 0; i < forms.size(); ++i)
    out += (i == 0 ? "" : i + 1 == forms.size() ? " or " : ", ") + forms[i];
  return out;
}

Status BackendRegistry::create(const std::string &spec, int localRank,
                               std::unique_ptr<Backend> &out) const {
  size_t colon = spec.find(':');
  const Entry *e = find(spec.substr(0, colon));
  Status bad =
      Status::failure("--device '" + spec + "': expected " + accepted());
  if (!e || (colon != std::string::npos && !e->takesDevice))
    return bad;
  int device = -1; // from the local rank
  if (colon != std::string::npos) {
    const char *digits = spec.c_str() + colon + 1;
    char *end = nullptr;
    long d = std::strtol(digits, &end, 10);
    if (!*digits || *end || d < 0 || d > 1024)
      return bad;
    device = static_cast<int>(d);
  }
  if (!e->factory) {
    std::string built;
    for (const std::string &n : names())
      built += (built.empty() ? "" : ", ") + n;
    return Status::failure("--device " + spec +
                           ": this smprun was built "
                           "without " +
                           e->title + " (" + e->why +
                           "); the backends built are: " + built);
  }
  return e->factory(device, localRank, out);
}

} // namespace smprt
