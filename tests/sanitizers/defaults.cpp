// Default run-time options of the sanitizers, linked into every executable of a
// -DGPT_SANITIZE build (cmake/GptSanitizers.cmake). Every report ends the process with a
// non-zero status; the suppressions files of this folder say, entry by entry, which reports
// come from libraries we link but do not build, and why they are not our bugs.
#define GPT_SUPP(name) "suppressions=" GPT_SANITIZER_DIR "/" name

extern "C" {
const char* __asan_default_options() {
    return "abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:"
           "detect_stack_use_after_return=1";
}
const char* __lsan_default_options() { return GPT_SUPP("lsan.supp") ":print_suppressions=0"; }
const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1:" GPT_SUPP("ubsan.supp"); }
const char* __tsan_default_options() {
    return "halt_on_error=1:second_deadlock_stack=1:" GPT_SUPP("tsan.supp") ":print_suppressions=0";
}
}
