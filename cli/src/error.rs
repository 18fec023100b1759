//! The client's one error type and the exit code each kind maps to.
//!
//! Exit codes tell apart what a script reacts to differently: fix the
//! command (2), retry or start the server (3), look at the server (4),
//! the thing named does not exist (5), the server refused (1).

use std::fmt;

/// The process exit codes of the client commands (docs/CLI.md).
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// The server refused the request (a 4xx other than 404): bad input,
    /// a missing or wrong admin token, a conflict.
    pub const REFUSED: u8 = 1;
    /// Bad usage: an unknown flag, a bad value (clap's code too).
    pub const USAGE: u8 = 2;
    /// No connection: nothing listens at `--url`, or the connection broke
    /// or timed out before an answer.
    pub const CONNECT: u8 = 3;
    /// The server failed (5xx), or answered something the client cannot
    /// read.
    pub const SERVER: u8 = 4;
    /// Not found (404): no such topic, partition, group or consumer.
    pub const NOT_FOUND: u8 = 5;
    /// Reading stdin or writing stdout failed.
    pub const LOCAL_IO: u8 = 6;
    /// `compact --wait`: the server's wait ended before every partition
    /// finished its pass.
    pub const TIMED_OUT: u8 = 7;
}

/// The text `--help` shows after each client command.
pub const EXIT_CODES_HELP: &str = exit_codes_text!();

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The command line is wrong in a way clap cannot see (a value's
    /// shape, a combination).
    #[error("{message}")]
    Usage { message: String },
    /// No TCP connection to the server.
    #[error("cannot connect to {url}: {source}")]
    Connect { url: String, source: std::io::Error },
    /// The connection broke, or no answer came in time.
    #[error("{what}: {reason}")]
    Transport { what: String, reason: String },
    /// The server answered an error (`error_code` and `message` of API.md,
    /// when the body has them).
    #[error("{what}: {}", ServerSaid { status: *status, error_code: *error_code, message })]
    Server {
        what: String,
        status: u16,
        error_code: Option<i64>,
        message: String,
    },
    /// A success answer the client cannot read.
    #[error("{what}: unexpected answer: {reason}")]
    BadAnswer { what: String, reason: String },
    /// stdin or stdout.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    /// `compact --wait` came back with `timed_out`.
    #[error("{what}: the server stopped waiting before every partition finished")]
    TimedOut { what: String },
}

struct ServerSaid<'a> {
    status: u16,
    error_code: Option<i64>,
    message: &'a str,
}

impl fmt::Display for ServerSaid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error_code {
            Some(code) => write!(
                f,
                "the server answered {} (error_code {code}): {}",
                self.status, self.message
            ),
            None => write!(f, "the server answered {}: {}", self.status, self.message),
        }
    }
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::Usage {
            message: message.into(),
        }
    }

    /// The process exit code for this error (see [`exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage { .. } => exit::USAGE,
            CliError::Connect { .. } | CliError::Transport { .. } => exit::CONNECT,
            CliError::Server { status: 404, .. } => exit::NOT_FOUND,
            CliError::Server { status, .. } if *status < 500 => exit::REFUSED,
            CliError::Server { .. } | CliError::BadAnswer { .. } => exit::SERVER,
            CliError::Io { .. } => exit::LOCAL_IO,
            CliError::TimedOut { .. } => exit::TIMED_OUT,
        }
    }

    /// A write to a closed pipe (`tidelog consume … | head`): the reader
    /// had enough, which is not a failure.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_status() {
        let server = |status| CliError::Server {
            what: "GET /x".into(),
            status,
            error_code: Some(i64::from(status) * 100 + 1),
            message: "no".into(),
        };
        assert_eq!(server(404).exit_code(), exit::NOT_FOUND);
        assert_eq!(server(401).exit_code(), exit::REFUSED);
        assert_eq!(server(409).exit_code(), exit::REFUSED);
        assert_eq!(server(503).exit_code(), exit::SERVER);
        assert_eq!(CliError::usage("x").exit_code(), exit::USAGE);
        assert_eq!(
            server(401).to_string(),
            "GET /x: the server answered 401 (error_code 40101): no"
        );
    }
}
