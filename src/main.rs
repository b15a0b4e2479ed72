fn main() {
    // Behave like a Unix tool when piped into `head`: end quietly on a closed pipe.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(atrex_tui::cli::main());
}
