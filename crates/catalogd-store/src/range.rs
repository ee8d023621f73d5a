//! A `Range` header against content of a known size, read as Go's `http.ServeContent` reads
//! it (upstream catalogd serves `/api/v1/all` with it): `bytes=a-b`, `bytes=a-` and the suffix
//! `bytes=-n`; ranges past the end are clipped; a range starting past the end does not
//! overlap (416 with `Content-Range`); anything that is not a byte range is invalid (416
//! without). Unlike Go, the suffix `bytes=-0`, or any range of empty content, overlaps nothing
//! (RFC 9110 §14.1.3; Go sends an empty 206, or a 200). One range is
//! answered with 206; several are answered with the whole content (200), which RFC 9110 allows,
//! where Go sends `multipart/byteranges` (a difference docs/catalogs.md names).

/// What to send for a request's `Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranged {
    /// The whole content (no Range, several ranges, or ranges covering more than the content).
    Whole,
    /// 206: `length` bytes from `start`.
    Part {
        /// The first byte.
        start: u64,
        /// How many bytes.
        length: u64,
    },
    /// 416: no range overlaps the content (answered with `Content-Range: bytes */SIZE`).
    Unsatisfiable,
    /// 416: the header is not a byte range (answered without `Content-Range`, as Go does).
    Invalid,
}

/// The answer to `range` (the header's value, if any) for content of `size` bytes.
pub fn ranged(range: Option<&str>, size: u64) -> Ranged {
    let Some(range) = range else {
        return Ranged::Whole;
    };
    let Some(specs) = range.strip_prefix("bytes=") else {
        return Ranged::Invalid;
    };
    let mut parts = Vec::new();
    let mut no_overlap = false;
    for spec in specs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((start, end)) = spec.split_once('-') else {
            return Ranged::Invalid;
        };
        let (start, end) = (start.trim(), end.trim());
        if start.is_empty() {
            // The last `end` bytes.
            let Ok(n) = end.parse::<u64>() else {
                return Ranged::Invalid;
            };
            // The last 0 bytes (or any of empty content) overlap nothing (RFC 9110 §14.1.3).
            if n == 0 || size == 0 {
                no_overlap = true;
                continue;
            }
            let n = n.min(size);
            parts.push((size - n, n));
            continue;
        }
        let Ok(first) = start.parse::<u64>() else {
            return Ranged::Invalid;
        };
        if first >= size {
            no_overlap = true;
            continue;
        }
        let length = if end.is_empty() {
            size - first
        } else {
            let Ok(last) = end.parse::<u64>() else {
                return Ranged::Invalid;
            };
            if first > last {
                return Ranged::Invalid;
            }
            last.min(size - 1) - first + 1
        };
        parts.push((first, length));
    }
    if parts.is_empty() {
        return if no_overlap {
            Ranged::Unsatisfiable
        } else {
            Ranged::Whole
        };
    }
    // Ranges asking for more than the content (overlapping ones, say) get the content once.
    let asked: u64 = parts.iter().map(|(_, l)| *l).sum();
    match parts.as_slice() {
        [(start, length)] if asked <= size => Ranged::Part {
            start: *start,
            length: *length,
        },
        _ => Ranged::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: u64, length: u64) -> Ranged {
        Ranged::Part { start, length }
    }

    #[test]
    fn one_byte_range_is_a_part_clipped_to_the_content() {
        assert_eq!(ranged(None, 100), Ranged::Whole);
        assert_eq!(ranged(Some("bytes=0-9"), 100), part(0, 10));
        assert_eq!(ranged(Some("bytes=90-"), 100), part(90, 10));
        assert_eq!(ranged(Some("bytes=-10"), 100), part(90, 10));
        assert_eq!(ranged(Some("bytes=95-200"), 100), part(95, 5));
        assert_eq!(ranged(Some("bytes=-500"), 100), part(0, 100));
        assert_eq!(ranged(Some("bytes= 5 - 6 "), 100), part(5, 2));
    }

    #[test]
    fn ranges_outside_the_content_are_unsatisfiable_and_others_invalid() {
        assert_eq!(ranged(Some("bytes=100-"), 100), Ranged::Unsatisfiable);
        assert_eq!(ranged(Some("bytes=200-300"), 100), Ranged::Unsatisfiable);
        assert_eq!(ranged(Some("bytes=5-1"), 100), Ranged::Invalid);
        assert_eq!(ranged(Some("bytes=x-1"), 100), Ranged::Invalid);
        assert_eq!(ranged(Some("bytes=1"), 100), Ranged::Invalid);
        assert_eq!(ranged(Some("lines=1-2"), 100), Ranged::Invalid);
        assert_eq!(ranged(Some("bytes=--5"), 100), Ranged::Invalid);
        assert_eq!(ranged(Some("bytes=0-1"), 0), Ranged::Unsatisfiable);
        assert_eq!(ranged(Some("bytes=-0"), 100), Ranged::Unsatisfiable);
        assert_eq!(ranged(Some("bytes=-5"), 0), Ranged::Unsatisfiable);
        // One range overlaps: the others are dropped, as Go drops them.
        assert_eq!(ranged(Some("bytes=200-300, 0-4"), 100), part(0, 5));
    }

    #[test]
    fn several_ranges_or_more_than_the_content_get_the_whole() {
        assert_eq!(ranged(Some("bytes=0-1,5-6"), 100), Ranged::Whole);
        assert_eq!(ranged(Some("bytes=0-99,0-99"), 100), Ranged::Whole);
        assert_eq!(ranged(Some("bytes="), 100), Ranged::Whole);
    }

    proptest::proptest! {
        /// Any header text against any size: an answer, never a panic, and a part always
        /// inside the content (what the response's Content-Range and body are cut from).
        #[test]
        fn any_range_header_is_answered_within_the_content(
            range in "(bytes=)?[-0-9, a-z]{0,40}",
            size in 0u64..5000,
        ) {
            if let Ranged::Part { start, length } = ranged(Some(&range), size) {
                proptest::prop_assert!(length > 0);
                proptest::prop_assert!(start + length <= size);
            }
        }

        /// A single `a-b` inside the content is exactly that part (agreement with the
        /// arithmetic of RFC 9110 §14.1.2).
        #[test]
        fn a_range_inside_the_content_is_that_part(size in 1u64..5000, a in 0u64..5000, n in 1u64..100) {
            let first = a % size;
            let last = first + n - 1;
            let expected = Ranged::Part { start: first, length: last.min(size - 1) - first + 1 };
            proptest::prop_assert_eq!(ranged(Some(&format!("bytes={first}-{last}")), size), expected);
        }
    }
}
