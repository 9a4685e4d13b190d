//! What a command-line user expects of any Unix tool, apart from what deepmerge does: shell
//! completions and a manual page generated from the one argument definition, a `--version` that
//! names the build's features, a quiet end when standard output is closed early
//! (`deepmerge info FILE | head -3`). (An output path that must name a file:
//! `deepmerge::preview::check_output_is_a_file`.)

use std::io::Write;

use clap_complete::Shell;
use deepmerge::{Error, Result};

/// What `deepmerge --version` prints after the name: the version, then the package's Cargo
/// features enabled in this build (`build.rs` collects them; "none" when there are none).
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nfeatures: ",
    env!("DEEPMERGE_FEATURES")
);

/// Let a closed standard output end the program as it ends `cat` or `ls`: by SIGPIPE, silently
/// (status 141 in a shell), instead of a "failed printing to stdout: Broken pipe" panic at
/// whichever `print!` meets it first. The Rust runtime ignores SIGPIPE so that writes return
/// EPIPE; nothing here handles EPIPE itself, so the default action is the right one everywhere
/// the CLI prints. A merge killed this way (its `--progress openjd` reader gone) leaves its
/// temporary file, which the next run writing the same output removes.
pub fn die_quietly_on_closed_stdout() {
    // SAFETY: setting a signal's disposition to its default before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Write the completion script of `command` for `shell` to standard output.
pub fn print_completions(shell: Shell, command: &mut clap::Command) {
    let name = command.get_name().to_string();
    clap_complete::generate(shell, command, name, &mut std::io::stdout());
}

/// Write the manual page of `command` (roff, section 1) to standard output, or with
/// `subcommand` the page of that subcommand, `deepmerge-NAME`, as the main page's SUBCOMMANDS
/// section names it.
pub fn print_manpage(command: clap::Command, subcommand: Option<&str>) -> Result<()> {
    let command = match subcommand {
        None => command,
        Some(name) => {
            // clap names commands with `&'static str`s; this one lives until the process ends
            // a moment later anyway.
            let page_name: &'static str =
                Box::leak(format!("{}-{name}", command.get_name()).into_boxed_str());
            command
                .find_subcommand(name)
                .cloned()
                .ok_or_else(|| Error::Usage(format!("manpage: no command named {name}")))?
                .name(page_name)
                .version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .map_err(|e| Error::internal(format!("cannot render the manual page: {e}")))?;
    let page = with_exit_status(&String::from_utf8_lossy(&page));
    std::io::stdout()
        .write_all(page.as_bytes())
        .map_err(|e| Error::write(std::path::Path::new("standard output"), e))
}

/// The EXIT STATUS section of every page (roff), which clap_mangen has no place for: the codes
/// `exit_code` in `main.rs` gives, as docs/cli.md's "Exit codes" table lists them.
const EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Success: every output (every frame) was written.
.TP
\fB1\fR
A file cannot be read or written, is corrupt, or uses what deepmerge does not read; OpenGL
cannot be used; an internal error. A frame sequence with failed frames exits 1 (with
\fB\-\-skip\-bad\-frames\fR, 0 when at least one frame was written).
.TP
\fB2\fR
A usage error: options that do not exist, do not fit together or do not fit the inputs, or
bad values.
.TP
\fB3\fR
Refused by the memory budget: a larger \fB\-\-memory\-budget\fR (\fB\-\-max\-memory\fR
for info, holdout and view) lets it run.
.PP
One line on standard error names the file and the problem. Closing standard output early
ends the program by SIGPIPE (status 141 in a shell).
"#;

/// `page` with [`EXIT_STATUS`] before its VERSION section (the last but AUTHORS), or at its
/// end without one.
fn with_exit_status(page: &str) -> String {
    let at = page.find("\n.SH VERSION\n").map_or(page.len(), |at| at + 1);
    let mut out = String::with_capacity(page.len() + EXIT_STATUS.len());
    out.push_str(&page[..at]);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(EXIT_STATUS);
    out.push_str(&page[at..]);
    out
}
