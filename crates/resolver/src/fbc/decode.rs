//! Splits one catalog file into blobs. As upstream's YAML-or-JSON decoder does, a file whose
//! first non-space character is `{` is a stream of concatenated JSON objects; anything else is a
//! stream of `---`-separated YAML documents. Every blob remembers the line it starts on, so
//! errors can say `file:line`.

use serde_json::Value;
use serde_json::value::RawValue;

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
    let first = bytes.iter().position(|b| !b.is_ascii_whitespace());
    match first {
        None => Ok(Vec::new()),
        Some(i) if bytes[i] == b'{' => decode_json(bytes),
        Some(_) => decode_yaml(bytes),
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

fn decode_json(bytes: &[u8]) -> Result<Vec<RawBlob>, DecodeError> {
    let mut blobs = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Box<RawValue>>();
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
        blobs.push(RawBlob {
            raw,
            line: cursor.line_at(begin),
        });
        start = stream.byte_offset();
    }
    Ok(blobs)
}

/// serde_json appends " at line L column C"; we report the line ourselves.
fn strip_position(message: &str) -> &str {
    message.rsplit_once(" at line ").map_or(message, |(m, _)| m)
}

fn is_separator(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

fn decode_yaml(bytes: &[u8]) -> Result<Vec<RawBlob>, DecodeError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        DecodeError {
            line,
            message: "the file is neither JSON nor UTF-8 YAML".into(),
        }
    })?;
    // (first line of the chunk, first line with content, byte range)
    let mut chunks: Vec<(usize, Option<usize>, usize, usize)> = Vec::new();
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let line_no = i + 1;
        if is_separator(line) || chunks.is_empty() {
            chunks.push((line_no, None, offset, offset));
        }
        if let Some(chunk) = chunks.last_mut() {
            chunk.3 = offset + line.len();
            let content = if is_separator(line) { &line[3..] } else { line };
            if chunk.1.is_none() && !is_blank_or_comment(content) && line.trim() != "..." {
                chunk.1 = Some(line_no);
            }
        }
        offset += line.len();
    }
    let mut blobs = Vec::new();
    for (first_line, content_line, from, to) in chunks {
        let Some(content_line) = content_line else {
            continue;
        };
        let value: Value = serde_saphyr::from_str(&text[from..to]).map_err(|e| {
            let line = e
                .location()
                .map_or(content_line, |l| first_line + l.line() as usize - 1);
            DecodeError {
                line,
                message: format!("invalid YAML: {}", yaml_message(&e)),
            }
        })?;
        if !value.is_null() {
            let raw = serde_json::value::to_raw_value(&value).map_err(|e| DecodeError {
                line: content_line,
                message: format!("invalid YAML: {e}"),
            })?;
            blobs.push(RawBlob {
                raw,
                line: content_line,
            });
        }
    }
    Ok(blobs)
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
    use serde_json::json;

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
    fn nothing_in_a_file_is_no_blobs() {
        assert!(decode(b"  \n\n").unwrap().is_empty());
    }
}
