//! `condense completions SHELL` and `condense man`: generated from the clap definition, so they
//! always match the commands and flags of this binary.

use crate::cli::{Cli, Shell};
use crate::Failure;
use clap::CommandFactory;

/// Prints the completion script for `shell`.
pub fn completions(shell: Shell) -> Result<(), Failure> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    match shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "condense", &mut out)
        }
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "condense", &mut out)
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "condense", &mut out)
        }
    }
    crate::output::print(&String::from_utf8_lossy(&out))
}

/// Prints the manual page, in roff: the command's help and one section per subcommand.
pub fn man() -> Result<(), Failure> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render(&mut out)
        .map_err(|e| Failure::run(format!("cannot render the manual: {e}")))?;
    // clap_mangen renders one page per command; the subcommands' own options and help go
    // after the main page so `man condense` holds everything.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let page = clap_mangen::Man::new(sub.clone());
        let mut text = format!(".SH \"CONDENSE {}\"\n", sub.get_name().to_uppercase()).into_bytes();
        page.render_synopsis_section(&mut text)
            .and_then(|()| page.render_description_section(&mut text))
            .and_then(|()| page.render_options_section(&mut text))
            .map_err(|e| Failure::run(format!("cannot render the manual: {e}")))?;
        out.extend_from_slice(&text);
    }
    crate::output::print(&String::from_utf8_lossy(&out))
}
