//===- ConfigFile.h - smpc --config FILE: SageMaker-style keys -*- C++ -*-===//
//
// A JSON object whose keys are SageMaker model-parallel v1 parameters
// (pipeline_parallel_degree, microbatches, ddp, ...) or smpc's own flags by
// their names ("batch-size" or "batch_size", "lr", "dim": {"seq": 16}).
// Each key becomes the flag tokens it stands for; the command line's own
// flags must agree with them. The Python package's `config=` goes through
// this code too (it writes the dict to a file and passes --config).
// DeepSpeedConfig.h reads DeepSpeed's config files into the same items.
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_CONFIGFILE_H
#define SMPC_CONFIGFILE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

/// Finds `--config FILE` (or `--config=FILE`) in `args`, removes it and puts
/// the flags the file stands for in front of the rest. Errors (an unreadable
/// file, an unknown key with a did-you-mean, a bad value, two keys or a key
/// and a command-line flag that disagree) come back as one message.
llvm::Error expandConfigFile(std::vector<std::string> &args);

/// The flag tokens of a config file's text (`origin` names it in errors),
/// checked against the flags of `commandLine` (the arguments without
/// --config); flags given there with the same value are left out.
llvm::Expected<std::vector<std::string>>
configFileFlags(llvm::StringRef text, llvm::StringRef origin,
                const std::vector<std::string> &commandLine = {});

/// One thing a key of a config file asks for: `flag` set (to `value`, when
/// it takes one), or with `present` false, `flag` (with `value`: that value
/// of it) ruled out.
struct ConfigItem {
  std::string key, shown; // the key as written, and its value as written
  std::string flag, value;
  bool present = true;
};

/// The flag tokens of `items` (read from `origin`): items of different keys
/// that disagree, or an item that disagrees with a flag of `commandLine`
/// (`where` says where those come from in the message), are refused; a
/// flag given there with the same value is left out.
llvm::Expected<std::vector<std::string>>
configItemTokens(const std::vector<ConfigItem> &items, llvm::StringRef origin,
                 const std::vector<std::string> &commandLine,
                 llvm::StringRef where = "on the command line");

/// `args`' flags and their values (switches: "").
std::multimap<std::string, std::string>
commandLineFlags(const std::vector<std::string> &args);

/// The integer value of `flag` among `cli`'s flags (commandLineFlags), if
/// given.
std::optional<int64_t>
flagInt(const std::multimap<std::string, std::string> &cli,
        llvm::StringRef flag);

/// The data-parallel degree `cli`'s flags fix: --dp, else --devices over
/// --tp (or `tp`, a config file's) x --pp; 1 without --devices (`given`
/// false where nothing says so). None where the planner chooses it
/// (--devices without --tp, --pp or pinned micro-batches, which
/// `microbatchesPinned` says besides --microbatches) or the degrees do not
/// divide --devices (smpc refuses them itself).
std::optional<int64_t>
dataParallelDegree(const std::multimap<std::string, std::string> &cli,
                   std::optional<int64_t> tp, bool microbatchesPinned,
                   bool &given);

/// A config file's flag tokens from its text, read from `path`, checked
/// against the other arguments.
using FileFlags = llvm::function_ref<llvm::Expected<std::vector<std::string>>(
    llvm::StringRef text, llvm::StringRef path,
    const std::vector<std::string> &rest)>;

/// Removes `FLAG FILE` (or `FLAG=FILE`) from `args`, reads FILE and puts the
/// flags `flagsOf` makes of it after the command. Given twice, without a
/// file or with a file that cannot be read is an error (`what` names the
/// file's kind: "config file").
llvm::Error expandFileFlag(std::vector<std::string> &args, llvm::StringRef flag,
                           llvm::StringRef what, const FileFlags &flagsOf);

/// `text` parsed as a JSON object; an error names `origin` and says that it
/// expects `what` (a JSON object of ...).
llvm::Expected<llvm::json::Value> parseJsonObject(llvm::StringRef text,
                                                  llvm::StringRef origin,
                                                  llvm::StringRef what);

/// A JSON value as written in the file ("0.1", "[0.9, 0.95]").
std::string shownValue(const llvm::json::Value &v);

/// The shortest text that reads back as `v` (3e-4, not 0.00029999...).
std::string shortestNumber(double v);

#endif // SMPC_CONFIGFILE_H
