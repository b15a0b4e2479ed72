fn main() {
    // Behave like a Unix tool when piped into `head`: end quietly on a closed pipe.
    // SAFETY: signal(2) with SIG_DFL installs no handler code and touches no memory of ours; it
    // runs first in `main`, before any thread exists that could change dispositions meanwhile.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(atrex_tui::cli::main());
}
