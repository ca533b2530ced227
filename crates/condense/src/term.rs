//! What condense prints on its own account, the way cargo and ripgrep do it.
//!
//! - `condense: error: ...` and `condense: warning: ...` lines on stderr, the `error:` /
//!   `warning:` word bold red / bold yellow when stderr is a terminal, never when it is piped,
//!   when `NO_COLOR` is set (any value, <https://no-color.org>) or `TERM=dumb`.
//! - A closed stdout (`condense plugins --details | head -2`) ends the run quietly with exit 0,
//!   as ripgrep does: the reader has what it wanted ([`is_broken_pipe_panic`]).
//! - Argument errors are one line plus the `--help` to try ([`clap_error_line`]).
//! - Text that came from a conversation is shown with its control characters escaped
//!   ([`escape_controls`]), so a tool's `ESC[?25l` cannot hide the terminal's cursor.

use std::io::IsTerminal;

/// Whether stderr takes colour: a terminal, `NO_COLOR` unset, `TERM` not `dumb`.
fn stderr_color() -> bool {
    std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none()
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// `word:` in bold `color` (an SGR code) when stderr takes colour.
fn label(word: &str, color: &str) -> String {
    if stderr_color() {
        format!("\x1b[1;{color}m{word}:\x1b[0m")
    } else {
        format!("{word}:")
    }
}

/// "condense: error: {message}" (the word bold red on a terminal).
pub fn error_line(message: &str) -> String {
    format!("condense: {} {message}", label("error", "31"))
}

/// "condense: warning: {message}" (the word bold yellow on a terminal).
pub fn warning_line(message: &str) -> String {
    format!("condense: {} {message}", label("warning", "33"))
}

/// Prints a warning line on stderr (a file skipped by a command over a folder, ...).
pub fn warn(message: &str) {
    eprintln!("{}", warning_line(message));
}

/// Whether a panic is `print!` failing on a closed stdout (std ignores SIGPIPE, so a write to a
/// pipe whose reader left fails with EPIPE, and `print!` panics with this message).
pub fn is_broken_pipe_panic(message: &str) -> bool {
    message.contains("failed printing to stdout") && message.contains("Broken pipe")
}

/// Whether an I/O error is a closed pipe.
pub fn is_broken_pipe(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// One line for a clap error: its first line without clap's `error: ` (with `tip:` folded in
/// when clap has one), and the help to read: "unexpected argument '--x' found (tip: ...);
/// see `condense stats --help`".
pub fn clap_error_line(e: &clap::Error, command: Option<&str>) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error:")
        .trim();
    // What helps fix it stays on the line: the values clap lists, its tip.
    let mut extra = String::new();
    for l in lines {
        if l.starts_with("[possible values:") {
            extra.push(' ');
            extra.push_str(l);
        } else if let Some(tip) = l.strip_prefix("tip:") {
            extra.push_str(&format!(" ({})", tip.trim()));
        }
    }
    let help = match command {
        Some(c) => format!("condense {c} --help"),
        None => "condense --help".to_string(),
    };
    format!("{first}{extra}; see `{help}`")
}

/// `text` with its control characters made visible: ESC as `\e`, other C0 and C1 controls and
/// DEL as `\xNN` / `\u{NN}`, `\r` as `\r`; newlines and tabs stay.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let is_control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\x1b' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            c if is_control(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_text_is_not() {
        assert_eq!(
            escape_controls("\x1b[?25lhidden\x07\r\n\tok\u{9b}\x7f"),
            "\\e[?25lhidden\\x07\\r\n\tok\\u{9b}\\x7f"
        );
        assert!(matches!(
            escape_controls("plain ✓\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn piped_lines_carry_no_colour() {
        // Tests run with stderr captured: not a terminal.
        assert_eq!(error_line("x"), "condense: error: x");
        assert_eq!(warning_line("y"), "condense: warning: y");
    }
}
