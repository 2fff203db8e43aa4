//! `fairway generate`: man pages and shell completions from the command's own
//! definition (clap_mangen, clap_complete), as `make install` and the packages ship them.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{CommandFactory as _, Subcommand};
use clap_complete::Shell;

use crate::Cli;

#[derive(Subcommand)]
pub enum GenerateCommand {
    /// Man pages: fairway.1 and one fairway-<command>.1 per subcommand, written to DIR.
    Man {
        /// Directory to write the pages to (created if missing).
        dir: PathBuf,
    },
    /// A shell's completion script, on standard output.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        shell: Shell,
    },
}

pub fn generate(c: GenerateCommand) -> anyhow::Result<()> {
    match c {
        GenerateCommand::Man { dir } => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let cmd = Cli::command();
            clap_mangen::generate_to(cmd, &dir).with_context(|| format!("cannot write man pages to {}", dir.display()))
        }
        GenerateCommand::Completion { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "fairway", &mut std::io::stdout());
            Ok(())
        }
    }
}
