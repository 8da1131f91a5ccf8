//! A reader that stops reading (`atomio explain … | head`) ends the command quietly.
//!
//! Rust ignores SIGPIPE, so the first `println!` after the reader has gone panics with
//! "failed printing to stdout: Broken pipe". Restoring the signal's default would be the
//! usual fix, but this process also writes to its workers' pipes and to sockets, where a
//! vanished peer must be an error it reports, not a signal that kills it. So only that one
//! panic is turned into the exit a shell expects from a process its pipe ended (141 =
//! 128 + SIGPIPE); every other panic reports as before.

/// Installs the hook; call once, first thing in `main`.
pub fn exit_quietly_when_the_reader_is_gone() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_closed_stdout(message) {
            std::process::exit(141);
        }
        report(info);
    }));
}

/// The message std's `print!` family panics with when standard output's reader is gone.
fn is_closed_stdout(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

#[cfg(test)]
mod tests {
    use super::is_closed_stdout;

    #[test]
    fn only_a_broken_stdout_pipe_is_quiet() {
        assert!(is_closed_stdout(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!is_closed_stdout(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_closed_stdout(
            "failed printing to stderr: Broken pipe (os error 32)"
        ));
        assert!(!is_closed_stdout("index out of bounds"));
    }
}
