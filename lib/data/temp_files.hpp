// Temporary files of an unfinished output (<file>.tmp.<pid>-<n>.<host>: temp_name_for), removed however the writer
// ends: by its destructor on errors, by a signal handler on SIGTERM (Slurm's time limit),
// SIGINT and SIGHUP, and, for a writer killed outright (SIGKILL, a node crash), by the next
// run that writes the same file.
#pragma once

#include <string>

namespace gpt::data {

// Registers / unregisters a temporary file for removal on SIGTERM, SIGINT and SIGHUP.
// Up to 64 at a time (more are not removed on a signal, only by the next run).
void remember_temp_file(const std::string& path);
void forget_temp_file(const std::string& path);
// Installs the handler: it unlinks the remembered files, then lets the signal take its
// default action (the process ends as the signal says). Call once at tool start-up.
void remove_temp_files_on_signals();
// Removes "<final_path>.tmp.<pid>-<n>.<host>" files of this host whose pid is no longer running
// (and the older "<final_path>.tmp.<pid>"); other hosts' files are left alone.
void remove_stale_temp_files(const std::string& final_path);
// The same for every final file in `dir` whose name ends with `suffix`, in one pass over the
// folder (a builder of hundreds of files in one folder scans it once, not once per file).
void remove_stale_temp_files_in(const std::string& dir, const std::string& suffix);

}  // namespace gpt::data
