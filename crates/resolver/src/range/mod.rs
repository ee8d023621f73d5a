//! Version ranges, in the two dialects OLM uses, over [`semver::Version`].
//!
//! * [`masterminds`]: Masterminds/semver v3.2.1 constraints, the syntax of a ClusterExtension's
//!   `spec.version` (`>=1.2, <2`, `~1.2`, `^1`, `1.2 - 1.4.5`, `1.x`, ...).
//! * [`blang`]: blang/semver v4.0.0 ranges, the syntax of a bundle's `olm.skipRange` and of
//!   `olm.package.required.versionRange` (`>=1.0.0 <2.0.0 || 3.x`).
//!
//! `semver::VersionReq` is deliberately not used: it is Cargo's syntax, which disagrees with both
//! (bare `1.2.3` means `^1.2.3` there, commas are mandatory, prereleases are matched differently).
//! Both parsers reproduce their Go originals' accepted inputs and meanings, including quirks,
//! because the same catalog must resolve the same way here as in upstream OLM; each module's docs
//! list the quirks and the few deliberate divergences.

pub mod blang;
pub mod masterminds;

pub use blang::Range;
pub use masterminds::Constraint;

/// Why a version or a version range could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// A range or constraint string was rejected; `reason` says where.
    #[error("invalid version range {input:?}: {reason}")]
    InvalidRange { input: String, reason: String },
    /// A bundle version was rejected.
    #[error("invalid version {input:?}: {reason}")]
    InvalidVersion { input: String, reason: String },
}

impl RangeError {
    pub(crate) fn range(input: &str, reason: impl Into<String>) -> Self {
        RangeError::InvalidRange {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Parses a bundle version (`olm.package` `version`) exactly as blang/semver v4 `Parse` does:
/// strict `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`, no `v` prefix, no surrounding whitespace,
/// no leading zeros in the numbers or in numeric prerelease identifiers.
///
/// `semver::Version::parse` already implements that grammar; the one difference is that blang
/// stores a numeric prerelease identifier in a `uint64` and rejects larger ones
/// (`1.0.0-18446744073709551616`), where the `semver` crate accepts any length. That check is
/// added here so that every version we accept, blang accepts too.
pub fn parse_bundle_version(s: &str) -> Result<semver::Version, RangeError> {
    parse_strict(s).map_err(|reason| RangeError::InvalidVersion {
        input: s.to_owned(),
        reason,
    })
}

/// [`parse_bundle_version`] with the bare reason as the error, for the range parsers' messages.
pub(crate) fn parse_strict(s: &str) -> Result<semver::Version, String> {
    let version = semver::Version::parse(s).map_err(|e| e.to_string())?;
    let too_big = |id: &&str| id.bytes().all(|b| b.is_ascii_digit()) && id.parse::<u64>().is_err();
    if let Some(id) = version
        .pre
        .as_str()
        .split('.')
        .filter(|id| !id.is_empty())
        .find(too_big)
    {
        return Err(format!(
            "numeric prerelease identifier {id:?} does not fit in 64 bits"
        ));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_versions() {
        for ok in [
            "0.0.0",
            "1.2.3",
            "1.2.3-rc.1",
            "1.2.3-0a",
            "1.2.3+001",
            "1.2.3-a-b+c-d.e",
            "1.0.0-18446744073709551615",
            "18446744073709551615.0.0",
        ] {
            assert!(parse_bundle_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "v1.2.3",
            "1.2",
            "1",
            "01.2.3",
            "1.02.3",
            "1.2.03",
            "1.2.3-01",
            "1.2.3-",
            "1.2.3+",
            "1.2.3-a..b",
            " 1.2.3",
            "1.2.3 ",
            "1.2.3.4",
            "1.2.3-a+b+c",
            "1.2.x",
            "1.0.0-18446744073709551616",
            "18446744073709551616.0.0",
            "1.2.3-é",
        ] {
            assert!(parse_bundle_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn error_messages_are_readable() {
        let err = parse_bundle_version("v1.0.0").unwrap_err();
        assert!(
            err.to_string().starts_with("invalid version \"v1.0.0\": "),
            "{err}"
        );
        let err = RangeError::range("abc", "improper constraint: abc");
        assert_eq!(
            err.to_string(),
            "invalid version range \"abc\": improper constraint: abc"
        );
    }
}
