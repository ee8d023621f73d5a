//! Log set-up: one `tracing` subscriber for the process, filtered by `RUST_LOG` (or the
//! manager's default), written as plain text for people at a terminal and as JSON lines in the
//! Helm chart, where a log pipeline parses them.

use crate::error::Error;
use std::{fmt, io::IsTerminal, str::FromStr};
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LogFormat {
    /// Human-readable text, coloured when stdout is a terminal.
    #[default]
    Plain,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "plain" | "text" => Ok(Self::Plain),
            "json" => Ok(Self::Json),
            _ => Err(Error::UnknownLogFormat(s.to_owned())),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Plain => "plain",
            Self::Json => "json",
        })
    }
}

/// Installs the global subscriber. The filter is `RUST_LOG` when set and non-empty, else
/// `default_filter` (e.g. `info,kube=warn`).
///
/// # Errors
///
/// [`Error::LogFilter`] if the chosen filter does not parse (a typo in `RUST_LOG` is reported,
/// not silently replaced), [`Error::LogFilterEncoding`] if `RUST_LOG` is not UTF-8, and
/// [`Error::TracingInit`] if a subscriber is already installed; calling this twice is an
/// error, never a panic.
pub fn init_tracing(format: LogFormat, default_filter: &str) -> Result<(), Error> {
    let filter = filter(std::env::var("RUST_LOG"), default_filter)?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let installed = match format {
        LogFormat::Plain => builder
            .with_ansi(std::io::stdout().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    installed.map_err(Error::TracingInit)
}

/// Installs a global subscriber for a command-line tool whose stdout is its output (a
/// report, JSON): plain logs on stderr. The filter is chosen as by [`init_tracing`].
///
/// # Errors
///
/// As [`init_tracing`].
pub fn init_cli_tracing(default_filter: &str) -> Result<(), Error> {
    let filter = filter(std::env::var("RUST_LOG"), default_filter)?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(Error::TracingInit)
}

fn filter(
    rust_log: Result<String, std::env::VarError>,
    default_filter: &str,
) -> Result<EnvFilter, Error> {
    let (text, origin) = match rust_log {
        Ok(value) if !value.trim().is_empty() => (value, "RUST_LOG"),
        Ok(_) | Err(std::env::VarError::NotPresent) => {
            (default_filter.to_owned(), "the default filter")
        }
        Err(std::env::VarError::NotUnicode(_)) => return Err(Error::LogFilterEncoding),
    };
    EnvFilter::try_new(&text).map_err(|source| Error::LogFilter {
        filter: text,
        origin,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::{LogFormat, filter, init_tracing};
    use crate::error::Error;
    use std::env::VarError;

    #[test]
    fn log_formats_parse_and_print_back() -> Result<(), Error> {
        for format in [LogFormat::Plain, LogFormat::Json] {
            assert_eq!(format.to_string().parse::<LogFormat>()?, format);
        }
        assert_eq!("JSON".parse::<LogFormat>()?, LogFormat::Json);
        assert!(matches!(
            "yaml".parse::<LogFormat>(),
            Err(Error::UnknownLogFormat(s)) if s == "yaml"
        ));
        Ok(())
    }

    #[test]
    fn rust_log_wins_over_the_default() -> Result<(), Error> {
        let chosen = filter(Ok("debug".to_owned()), "info")?;
        assert_eq!(chosen.to_string(), "debug");
        Ok(())
    }

    #[test]
    fn unset_or_empty_rust_log_falls_back_to_the_default() -> Result<(), Error> {
        assert_eq!(
            filter(Err(VarError::NotPresent), "info,kube=warn")?.to_string(),
            "kube=warn,info"
        );
        assert_eq!(filter(Ok("  ".to_owned()), "warn")?.to_string(), "warn");
        Ok(())
    }

    #[test]
    fn a_bad_filter_is_an_error_naming_its_origin() {
        let bad = filter(Ok("info,=[".to_owned()), "info");
        assert!(
            matches!(
                &bad,
                Err(Error::LogFilter {
                    origin: "RUST_LOG",
                    ..
                })
            ),
            "{bad:?}"
        );
    }

    #[test]
    fn initialising_twice_is_an_error_not_a_panic() {
        // Whichever test in this binary installs first wins; the second call must fail cleanly.
        let _first = init_tracing(LogFormat::Plain, "off");
        assert!(matches!(
            init_tracing(LogFormat::Json, "off"),
            Err(Error::TracingInit(_))
        ));
    }
}
