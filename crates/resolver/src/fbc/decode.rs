//! Splits one catalog file into blobs. As upstream's YAML-or-JSON decoder does, a file whose
//! first non-space character is `{` is a stream of concatenated JSON objects; anything else is a
//! stream of `---`-separated YAML documents. Every blob remembers the line it starts on, so
//! errors can say `file:line`.
//!
//! Decoding streams: each blob is handed to a sink as soon as it is read (JSON text borrowed
//! from the input, YAML documents converted to JSON one at a time), so its cost is
//! proportional to the input whatever the number of blobs.

use serde_json::value::RawValue;

pub use super::yaml::Documents;

/// One decoded document of a file, as JSON text. JSON input is kept as it was written (no value
/// tree is built while loading, which is most of the cost and memory of a large catalog); YAML
/// documents are converted to JSON.
#[derive(Debug, Clone)]
pub struct RawBlob {
    /// The document as JSON text.
    pub raw: Box<RawValue>,
    /// 1-based line where the document starts.
    pub line: usize,
}

/// A file that is not valid JSON or YAML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// 1-based line of the problem.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Decodes every document of a file. Empty YAML documents are skipped.
pub fn decode(bytes: &[u8]) -> Result<Vec<RawBlob>, DecodeError> {
    let mut blobs = Vec::new();
    let mut error = None;
    decode_with(
        bytes,
        &mut |json: &str, line| match RawValue::from_string(json.to_owned()) {
            Ok(raw) => blobs.push(RawBlob { raw, line }),
            Err(e) => {
                error.get_or_insert(DecodeError {
                    line,
                    message: format!("invalid JSON: {e}"),
                });
            }
        },
    )?;
    match error {
        Some(e) => Err(e),
        None => Ok(blobs),
    }
}

/// Decodes every document of a file, handing each to `sink` as JSON text with the 1-based line
/// it starts on. Empty YAML documents are skipped.
pub fn decode_with(bytes: &[u8], sink: &mut dyn FnMut(&str, usize)) -> Result<(), DecodeError> {
    let first = bytes.iter().position(|b| !b.is_ascii_whitespace());
    match first {
        None => Ok(()),
        Some(i) if bytes[i] == b'{' => decode_json(bytes, sink),
        Some(_) => decode_yaml(bytes, sink),
    }
}

/// Counts lines incrementally, so a file is scanned for newlines once.
struct LineCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> LineCursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            line: 1,
        }
    }

    fn line_at(&mut self, pos: usize) -> usize {
        let end = pos.min(self.bytes.len());
        if end > self.pos {
            self.line += self.bytes[self.pos..end]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.pos = end;
        }
        self.line
    }
}

fn decode_json(bytes: &[u8], sink: &mut dyn FnMut(&str, usize)) -> Result<(), DecodeError> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<&RawValue>();
    let mut cursor = LineCursor::new(bytes);
    let mut start = 0;
    while let Some(next) = stream.next() {
        let raw = next.map_err(|e| DecodeError {
            line: e.line().max(1),
            message: format!("invalid JSON: {}", strip_position(&e.to_string())),
        })?;
        let begin = start
            + bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
        sink(raw.get(), cursor.line_at(begin));
        start = stream.byte_offset();
    }
    Ok(())
}

/// serde_json appends " at line L column C"; we report the line ourselves.
fn strip_position(message: &str) -> &str {
    message.rsplit_once(" at line ").map_or(message, |(m, _)| m)
}

fn decode_yaml(bytes: &[u8], sink: &mut dyn FnMut(&str, usize)) -> Result<(), DecodeError> {
    for (json, line) in yaml_documents(bytes)?.iter() {
        sink(json, line);
    }
    Ok(())
}

/// Converts a file of YAML documents to JSON, every document at once (about the file's size):
/// by the fast path when it reads the file, else by saphyr.
pub fn yaml_documents(bytes: &[u8]) -> Result<Documents, DecodeError> {
    let text = utf8(bytes)?;
    match super::yaml_block::documents(text) {
        Some(docs) => Ok(docs),
        None => saphyr_documents(text),
    }
}

/// The two ways a YAML file is read, for tests that compare them: the fast path (`None` when
/// it leaves the file to saphyr) and saphyr's.
pub fn yaml_both(text: &str) -> (Option<Documents>, Result<Documents, DecodeError>) {
    (super::yaml_block::documents(text), saphyr_documents(text))
}

fn utf8(bytes: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| DecodeError {
        line: 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        message: "the file is neither JSON nor UTF-8 YAML".into(),
    })
}

fn saphyr_documents(text: &str) -> Result<Documents, DecodeError> {
    // One parser for the whole stream (a parser per document costs more than a tiny document).
    // Its count limits would refuse a catalog of many small documents: the input's size, which
    // the callers bound, bounds them instead (without aliases a byte makes at most two events
    // or nodes, plus a few for the stream: `a: b` is 5 bytes and 8 events, which a bound of the
    // size alone refused). Alias and depth limits stay, against YAML bombs.
    let size = 2 * text.len() + 16;
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: None,
            max_events: size,
            max_nodes: size,
            max_documents: size,
            max_total_scalar_bytes: size,
        },
    };
    super::yaml::documents(text, options).map_err(|e| DecodeError {
        line: e.location().map_or(1, |l| l.line() as usize),
        message: format!("invalid YAML: {}", yaml_message(&e)),
    })
}

/// Whether a file is YAML (not JSON, not empty), as [`decode_with`] decides.
pub fn is_yaml(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b != b'{')
}

/// The first line of saphyr's message: later lines repeat the source with a caret.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    first
        .rsplit_once(" at line ")
        .map_or(first, |(m, _)| m)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parsed(blobs: Vec<RawBlob>) -> Vec<(Value, usize)> {
        blobs
            .into_iter()
            .map(|b| (serde_json::from_str(b.raw.get()).unwrap(), b.line))
            .collect()
    }

    #[test]
    fn a_json_stream_yields_each_object_with_its_line() {
        let blobs = decode(b"\n{\"a\":1}\n\n  {\"b\":\n2}{\"c\":3}\n").unwrap();
        assert_eq!(
            parsed(blobs),
            vec![
                (json!({"a": 1}), 2),
                (json!({"b": 2}), 4),
                (json!({"c": 3}), 5),
            ]
        );
    }

    #[test]
    fn broken_json_names_the_line() {
        let err = decode(b"{\"a\":1}\n{\"b\":\n  ]}").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.starts_with("invalid JSON"), "{}", err.message);
    }

    #[test]
    fn yaml_documents_are_split_on_separators_and_empty_ones_skipped() {
        let text =
            "# header\n---\nschema: a\nname: x\n---\n# only a comment\n---\n\nschema: b\n...\n";
        let blobs = decode(text.as_bytes()).unwrap();
        assert_eq!(
            parsed(blobs),
            vec![
                (json!({"schema": "a", "name": "x"}), 3),
                (json!({"schema": "b"}), 9),
            ]
        );
    }

    #[test]
    fn yaml_without_a_leading_separator_is_one_document() {
        let blobs = decode(b"schema: a\nlist:\n- 1\n- two\n").unwrap();
        assert_eq!(
            parsed(blobs),
            vec![(json!({"schema": "a", "list": [1, "two"]}), 1)]
        );
    }

    #[test]
    fn broken_yaml_names_the_line_in_the_file() {
        let err = decode(b"---\nschema: a\n---\nschema: b\nname: [unclosed\n").unwrap_err();
        assert!(err.line >= 4, "line {}", err.line);
        assert!(err.message.starts_with("invalid YAML"), "{}", err.message);
    }

    #[test]
    fn a_tiny_yaml_file_is_within_the_parsers_budget() {
        // Found by the fuzz target `yaml_json`: saphyr refused `a: b` (5 bytes, 8 events).
        let (fast, saphyr) = yaml_both("a: [b, {}]\n");
        assert!(fast.is_some());
        assert_eq!(saphyr.unwrap().iter().count(), 1);
    }

    #[test]
    fn nothing_in_a_file_is_no_blobs() {
        assert!(decode(b"  \n\n").unwrap().is_empty());
    }
}
