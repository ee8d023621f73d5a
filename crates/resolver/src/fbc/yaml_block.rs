//! A fast path for the YAML that catalogs are written in: block mappings and sequences, plain,
//! quoted and literal scalars, and one-line flow collections, as `opm` and people write them.
//!
//! saphyr (through serde) costs about 3 µs a document; this reads the same documents several
//! times faster by working on lines and writing JSON as it goes. It gives up (returns `None`)
//! on anything it does not handle exactly as saphyr does: anchors, aliases, tags, directives,
//! complex keys, folded scalars, tabs or carriage returns, multi-line flow collections, any
//! scalar whose type it is not sure of, and every error. The caller then reads the file with
//! saphyr, so results and error messages are always saphyr's; the fuzz target `yaml_json`
//! checks that both paths give the same JSON.

use super::yaml::Documents;

/// Gives up on the fast path.
struct Unsupported;

type Result<T> = std::result::Result<T, Unsupported>;

/// The deepest nesting of mappings and sequences (block and flow together) the fast path
/// reads: saphyr's own limit (its budget's `max_depth`), past which it refuses the file. The
/// fast path gives up there, so saphyr's message is the one given, and its recursion stays
/// within a small thread stack (a 200 KB file of `- - - …` nested 100,000 deep).
pub const MAX_DEPTH: usize = 64;

/// The most keys of one mapping the fast path reads (duplicates are looked for by
/// comparison with every earlier key); larger mappings are left to saphyr, which finds
/// duplicates with a hash set.
const MAX_KEYS: usize = 256;

/// The longest span, in bytes, from a key's start to its `:` that the fast path reads: YAML
/// limits implicit keys to 1024 characters, and saphyr refuses longer ones (found by the fuzz
/// target `yaml_nest`). A byte count at most this is a character count within the limit.
const MAX_KEY_SPAN: usize = 1000;

/// Converts every document of `text`, or `None` when saphyr must read it.
pub fn documents(text: &str) -> Option<Documents> {
    // A last line without its newline is left to saphyr (block scalars' chomping there).
    if !text.ends_with('\n') || !plain_text(text) {
        return None;
    }
    // saphyr buffers the comments it meets while looking ahead, and refuses more than a few
    // dozen in a row: long runs of comment lines are left to it.
    let mut run = 0;
    let mut lines = Lines::new(text);
    while let Some(line) = lines.peek() {
        run = if line.rest.starts_with('#') {
            run + 1
        } else {
            0
        };
        if run > 16 {
            return None;
        }
        let _ = lines.advance_past_empty();
        // Empty lines stepped over end a run of comments, as each did one at a time.
        if lines.peek().is_some_and(|l| l.number > line.number + 1) {
            run = 0;
        }
    }
    let mut parser = Parser {
        lines: Lines::new(text),
        depth: 0,
    };
    let mut docs = Documents::default();
    parser.stream(&mut docs).ok()?;
    Some(docs)
}

/// Only text saphyr reads the same way line by line: no tabs, carriage returns, byte order
/// marks or other control characters, and only printable non-ASCII characters.
fn plain_text(text: &str) -> bool {
    let ascii_ok = text
        .bytes()
        .all(|b| b == b'\n' || (0x20..0x7f).contains(&b) || b >= 0x80);
    ascii_ok
        && (text.is_ascii()
            || text.chars().all(|c| {
                c.is_ascii()
                    || matches!(c, '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
                        && c != '\u{feff}'
            }))
}

#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    /// Leading spaces.
    indent: usize,
    /// The line after its indentation, without the newline.
    rest: &'a str,
    /// 1-based.
    number: usize,
}

impl Line<'_> {
    /// Only spaces or a comment.
    fn is_blank(&self) -> bool {
        self.rest.is_empty() || self.rest.starts_with('#')
    }

    /// A document marker (`---` or `...`) at column 0.
    fn is_marker(&self) -> bool {
        self.indent == 0
            && (self.rest.starts_with("---") || self.rest.starts_with("..."))
            && self.rest[3..].chars().next().is_none_or(|c| c == ' ')
    }
}

/// The lines of a text that ends with a newline, read one at a time: a table of every line
/// would take 40 bytes a line, 2.5 GB for 64 MiB of newlines.
#[derive(Debug, Clone, Copy)]
struct Lines<'a> {
    text: &'a str,
    /// Where the current line starts (the text's length at the end).
    start: usize,
    /// Where the line after the current one starts.
    next: usize,
    /// The current line; `None` at the end.
    current: Option<Line<'a>>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let mut lines = Lines {
            text,
            start: 0,
            next: 0,
            current: None,
        };
        lines.read(1);
        lines
    }

    /// Reads the line starting at `self.next`, numbered `number`.
    fn read(&mut self, number: usize) {
        let start = self.next.min(self.text.len());
        self.start = start;
        if start >= self.text.len() {
            self.current = None;
            return;
        }
        let end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let line = &self.text[start..end];
        let rest = line.trim_start_matches(' ');
        self.current = Some(Line {
            indent: line.len() - rest.len(),
            rest,
            number,
        });
        self.next = end + 1;
    }

    /// The current line.
    fn peek(&self) -> Option<Line<'a>> {
        self.current
    }

    /// On to the next line.
    fn advance(&mut self) {
        if let Some(line) = self.current {
            self.read(line.number + 1);
        }
    }

    /// On past the current line and every empty line right after it, at once (a file of
    /// millions of newlines is read at memory speed, not a line at a time); how many lines
    /// that was.
    fn advance_past_empty(&mut self) -> usize {
        let Some(line) = self.current else {
            return 0;
        };
        let run = self.text.as_bytes()[self.next.min(self.text.len())..]
            .iter()
            .take_while(|&&b| b == b'\n')
            .count();
        self.next += run;
        self.read(line.number + 1 + run);
        1 + run
    }

    /// Whether this cursor is further on than `other` (of the same text); at the end is further
    /// on than any line.
    fn is_past(&self, other: &Lines<'_>) -> bool {
        self.start > other.start
    }
}

struct Parser<'a> {
    lines: Lines<'a>,
    /// How many mappings and sequences the current node is in.
    depth: usize,
}

/// Where a node starts: a line, and the column its text begins at (after a `- ` or a key, it
/// is not the line's indentation).
#[derive(Debug, Clone, Copy)]
struct At<'a> {
    column: usize,
    text: &'a str,
}

impl<'a> Parser<'a> {
    fn stream(&mut self, docs: &mut Documents) -> Result<()> {
        loop {
            self.skip_blank();
            let Some(line) = self.lines.peek() else {
                return Ok(());
            };
            if line.is_marker() {
                if !line.rest.starts_with("---") {
                    return Err(Unsupported);
                }
                let after = line.rest[3..].trim_start_matches(' ');
                if !(after.is_empty() || after.starts_with('#')) {
                    return Err(Unsupported);
                }
                self.lines.advance();
                continue;
            }
            if line.rest.starts_with('%') {
                return Err(Unsupported);
            }
            // A document: only a block mapping (a catalog's blob) is taken here.
            if !is_mapping_line(line.rest)? {
                return Err(Unsupported);
            }
            let out = docs.begin();
            self.lines.advance();
            self.mapping(line.indent, line.rest, out)?;
            docs.end(line.number);
            self.skip_blank();
            match self.lines.peek() {
                None => return Ok(()),
                Some(l) if l.is_marker() => {}
                Some(_) => return Err(Unsupported),
            }
        }
    }

    /// One level deeper, or give up past saphyr's limit (block recursion must not outgrow a
    /// small stack).
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Unsupported);
        }
        Ok(())
    }

    fn skip_blank(&mut self) {
        while self.lines.peek().is_some_and(|l| l.is_blank()) {
            let _ = self.lines.advance_past_empty();
        }
    }

    /// A block mapping whose keys are at `column`; its first key starts `first` (on the
    /// current line).
    fn mapping(&mut self, column: usize, first: &'a str, out: &mut Vec<u8>) -> Result<()> {
        self.enter()?;
        out.push(b'{');
        let mut keys: Vec<(usize, usize)> = Vec::new();
        let mut text = first;
        loop {
            let (key, value) = split_key(text)?;
            let start = out.len() + usize::from(!keys.is_empty());
            if !keys.is_empty() {
                out.push(b',');
            }
            write_string(out, &key);
            let end = out.len();
            let new = &out[start..end];
            if keys.iter().any(|&(s, e)| &out[s..e] == new) || keys.len() >= MAX_KEYS {
                // saphyr refuses duplicate keys; very large mappings are left to it too.
                return Err(Unsupported);
            }
            keys.push((start, end));
            out.push(b':');
            self.value(
                column as isize,
                At {
                    column: column + (text.len() - value.len()),
                    text: value,
                },
                true,
                out,
            )?;
            // The next key, at the same column.
            self.skip_blank();
            match self.lines.peek() {
                Some(l) if !l.is_marker() && l.indent == column => {
                    if l.rest.starts_with("- ") || l.rest == "-" {
                        return Err(Unsupported);
                    }
                    self.lines.advance();
                    text = l.rest;
                }
                Some(l) if !l.is_marker() && l.indent > column => return Err(Unsupported),
                _ => break,
            }
        }
        out.push(b'}');
        self.depth -= 1;
        Ok(())
    }

    /// A block sequence whose dashes are at `column`; the first item's text (after its dash)
    /// is `first`.
    fn sequence(&mut self, column: usize, first: &'a str, out: &mut Vec<u8>) -> Result<()> {
        self.enter()?;
        out.push(b'[');
        let mut item = first;
        let mut count = 0;
        loop {
            if count > 0 {
                out.push(b',');
            }
            count += 1;
            let text = item.trim_start_matches(' ');
            self.value(
                column as isize,
                At {
                    column: column + 1 + (item.len() - text.len()),
                    text,
                },
                false,
                out,
            )?;
            self.skip_blank();
            match self.lines.peek() {
                Some(l) if !l.is_marker() && l.indent == column && is_dash(l.rest) => {
                    self.lines.advance();
                    item = &l.rest[1..];
                }
                Some(l) if !l.is_marker() && l.indent > column => return Err(Unsupported),
                _ => break,
            }
        }
        out.push(b']');
        self.depth -= 1;
        Ok(())
    }

    /// The value of a key or item whose parent is at `parent`, its text starting `at` on the
    /// current line (consumed already). A key's value may be a sequence at the key's column.
    fn value(&mut self, parent: isize, at: At<'a>, of_key: bool, out: &mut Vec<u8>) -> Result<()> {
        let text = at.text;
        if text.is_empty() || text.starts_with('#') {
            // The value is on the lines below, or null.
            self.skip_blank();
            let below = self.lines.peek().filter(|l| !l.is_marker());
            let seq_here = |l: &Line| of_key && l.indent as isize == parent && is_dash(l.rest);
            return match below {
                Some(l) if seq_here(&l) => {
                    self.lines.advance();
                    self.sequence(l.indent, &l.rest[1..], out)
                }
                Some(l) if l.indent as isize > parent => {
                    self.lines.advance();
                    self.node(parent, l.indent, l.rest, out)
                }
                _ => {
                    out.extend_from_slice(b"null");
                    Ok(())
                }
            };
        }
        if !of_key {
            // An item's text may open a compact sequence or mapping.
            return self.node(parent, at.column, text, out);
        }
        // A key's value on its line is a scalar: `a: b: c` and `a: - b` are errors.
        if is_dash(text) || is_mapping_line(text)? {
            return Err(Unsupported);
        }
        self.scalar(parent, text, out)
    }

    /// A node starting at `column` with `text`, below `parent`.
    fn node(
        &mut self,
        parent: isize,
        column: usize,
        text: &'a str,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if is_dash(text) {
            return self.sequence(column, &text[1..], out);
        }
        if is_mapping_line(text)? {
            return self.mapping(column, text, out);
        }
        self.scalar(parent, text, out)
    }

    /// A scalar (or one-line flow collection) starting with `text`; continuation lines must be
    /// indented more than `parent`.
    fn scalar(&mut self, parent: isize, text: &'a str, out: &mut Vec<u8>) -> Result<()> {
        match text.as_bytes().first() {
            Some(b'|') => self.literal(parent, text, out),
            Some(b'"' | b'\'') => {
                let (value, rest) = self.quoted(parent, text)?;
                end_of_line(rest)?;
                write_string(out, &value);
                Ok(())
            }
            Some(b'[' | b'{') => {
                let rest = flow(text, out, self.depth)?;
                end_of_line(rest)
            }
            Some(b'>' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`' | b'?' | b',' | b']' | b'}') => {
                Err(Unsupported)
            }
            _ => {
                let (first, rest) = plain_end(text, false);
                end_of_line(rest)?;
                let mut value = std::borrow::Cow::Borrowed(first);
                // Continuation lines fold into one string (none after a comment).
                let mut breaks = 0;
                while let Some(l) = self.lines.peek().filter(|_| rest.is_empty()) {
                    if l.rest.is_empty() {
                        breaks += self.lines.advance_past_empty();
                        continue;
                    }
                    if l.is_marker() || l.indent as isize <= parent || l.rest.starts_with('#') {
                        break;
                    }
                    let (more, rest) = plain_end(l.rest, false);
                    if more.is_empty()
                        || is_dash(more)
                        || l.rest.starts_with([
                            '[', '{', '"', '\'', '|', '>', '&', '*', '!', '%', '@', '`', '?',
                        ])
                    {
                        return Err(Unsupported);
                    }
                    end_of_line(rest)?;
                    let comment = !rest.is_empty();
                    let v = value.to_mut();
                    if breaks == 0 {
                        v.push(' ');
                    }
                    (0..breaks).for_each(|_| v.push('\n'));
                    v.push_str(more);
                    breaks = 0;
                    self.lines.advance();
                    if comment {
                        break;
                    }
                }
                if let std::borrow::Cow::Borrowed(v) = value {
                    return write_plain(out, v);
                }
                write_string(out, &value);
                Ok(())
            }
        }
    }

    /// A quoted scalar, possibly over several lines; the text after it on its last line.
    fn quoted(&mut self, parent: isize, text: &'a str) -> Result<(String, &'a str)> {
        let double = text.starts_with('"');
        let mut value = String::new();
        let mut rest = &text[1..];
        loop {
            // One line's part.
            let mut chars = rest.char_indices();
            let mut pending_space = String::new();
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' if double => {
                        value.push_str(&pending_space);
                        return Ok((value, &rest[i + 1..]));
                    }
                    '\'' if !double => {
                        if rest[i + 1..].starts_with('\'') {
                            value.push_str(&pending_space);
                            pending_space.clear();
                            value.push('\'');
                            chars.next();
                        } else {
                            value.push_str(&pending_space);
                            return Ok((value, &rest[i + 1..]));
                        }
                    }
                    '\\' if double => {
                        value.push_str(&pending_space);
                        pending_space.clear();
                        let (ch, len) = escape(&rest[i + 1..])?;
                        value.push(ch);
                        for _ in 0..len {
                            chars.next();
                        }
                    }
                    ' ' => pending_space.push(' '),
                    c => {
                        value.push_str(&pending_space);
                        pending_space.clear();
                        value.push(c);
                    }
                }
            }
            // The line ended inside the scalar: fold (trailing spaces dropped, one break is a
            // space, more are newlines). A `\` at the end of a line is left to saphyr.
            if parent < 0 || rest.ends_with('\\') {
                return Err(Unsupported);
            }
            let mut breaks = 0;
            loop {
                let l = self.lines.peek().ok_or(Unsupported)?;
                if l.is_marker() {
                    return Err(Unsupported);
                }
                if l.rest.is_empty() {
                    breaks += self.lines.advance_past_empty();
                    continue;
                }
                if l.indent as isize <= parent {
                    return Err(Unsupported);
                }
                rest = l.rest;
                self.lines.advance();
                break;
            }
            if breaks == 0 {
                value.push(' ');
            }
            (0..breaks).for_each(|_| value.push('\n'));
        }
    }

    /// A literal block scalar (`|`, `|-`, `|+`) below `parent`.
    fn literal(&mut self, parent: isize, text: &str, out: &mut Vec<u8>) -> Result<()> {
        let header = &text[1..];
        let (chomp, after) = match header.as_bytes().first() {
            Some(b'-') => (Chomp::Strip, &header[1..]),
            Some(b'+') => (Chomp::Keep, &header[1..]),
            _ => (Chomp::Clip, header),
        };
        let after_trimmed = after.trim_start_matches(' ');
        if !(after_trimmed.is_empty()
            || (after_trimmed.starts_with('#') && after_trimmed.len() < after.len()))
        {
            return Err(Unsupported);
        }
        // The content's indentation is the first non-empty line's; lines before it must be
        // empty (saphyr refuses leading lines more indented than the content).
        let mut first = self.lines;
        let mut leading_indent = 0;
        while let Some(l) = first.peek().filter(|l| l.rest.is_empty()) {
            leading_indent = leading_indent.max(l.indent);
            first.advance();
        }
        let content = first
            .peek()
            .filter(|l| l.indent as isize > parent && !l.is_marker())
            .map(|l| l.indent);
        let mut value = String::new();
        let mut trailing = 0;
        if let Some(indent) = content {
            if leading_indent > indent {
                return Err(Unsupported);
            }
            let mut lines_seen = 0;
            while let Some(l) = self.lines.peek() {
                if l.rest.is_empty() {
                    if l.indent > indent {
                        return Err(Unsupported);
                    }
                    trailing += self.lines.advance_past_empty();
                    continue;
                } else if l.indent >= indent && !l.is_marker() {
                    if lines_seen > 0 || trailing > 0 {
                        (0..trailing + usize::from(lines_seen > 0)).for_each(|_| value.push('\n'));
                    }
                    trailing = 0;
                    (0..l.indent - indent).for_each(|_| value.push(' '));
                    value.push_str(l.rest);
                    lines_seen += 1;
                } else {
                    break;
                }
                self.lines.advance();
            }
            // `trailing` counts the empty lines after the last content line.
            match chomp {
                Chomp::Strip => {}
                Chomp::Clip => value.push('\n'),
                Chomp::Keep => (0..=trailing).for_each(|_| value.push('\n')),
            }
        } else if first.is_past(&self.lines) {
            // No content, only empty lines: left to saphyr.
            return Err(Unsupported);
        }
        write_string(out, &value);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chomp {
    Strip,
    Clip,
    Keep,
}

/// `-` alone or followed by a space: a sequence item.
fn is_dash(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Whether `text` starts a block mapping entry (`key:` then a space or the end).
fn is_mapping_line(text: &str) -> Result<bool> {
    match text.as_bytes().first() {
        Some(b'"' | b'\'') => {
            // A quote that does not close on its line is a multi-line scalar, not a key.
            let Some((_, rest)) = quoted_one_line(text) else {
                return Ok(false);
            };
            let rest = rest.trim_start_matches(' ');
            Ok(rest == ":" || rest.starts_with(": "))
        }
        Some(b'?' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`') => Err(Unsupported),
        // Block scalars and flow collections (whose keys are left to `scalar`).
        Some(b'|' | b'>' | b'[' | b'{') => Ok(false),
        _ => Ok(plain_key_end(text).is_some()),
    }
}

/// Where a plain key ends (the `:` that follows it), if the text is `key:` then a space or
/// the end, without a comment before it.
fn plain_key_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b':' if i + 1 == bytes.len() || bytes[i + 1] == b' ' => return Some(i),
            b'#' if i > 0 && bytes[i - 1] == b' ' => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// A mapping entry's key and the text after `: ` (spaces skipped).
fn split_key(text: &str) -> Result<(String, &str)> {
    let (key, rest) = match text.as_bytes().first() {
        Some(b'"' | b'\'') => {
            let (key, rest) = quoted_one_line(text).ok_or(Unsupported)?;
            let rest = rest.trim_start_matches(' ');
            (key, rest.strip_prefix(':').ok_or(Unsupported)?)
        }
        _ => {
            let end = plain_key_end(text).ok_or(Unsupported)?;
            let key = text[..end].trim_end_matches(' ');
            // Keys saphyr would type or merge (numbers, booleans, nulls, `<<`) are left to it.
            if !plain_is_string(key) || key.starts_with(['-', '?', ':']) || key == "<<" {
                return Err(Unsupported);
            }
            (key.to_owned(), &text[end + 1..])
        }
    };
    if !(rest.is_empty() || rest.starts_with(' ')) || text.len() - rest.len() > MAX_KEY_SPAN {
        return Err(Unsupported);
    }
    Ok((key, rest.trim_start_matches(' ')))
}

/// A one-line quoted scalar at the start of `text`, and what follows it.
fn quoted_one_line(text: &str) -> Option<(String, &str)> {
    let double = text.starts_with('"');
    let mut value = String::new();
    let body = &text[1..];
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' if double => return Some((value, &body[i + 1..])),
            '\'' if !double => {
                if body[i + 1..].starts_with('\'') {
                    value.push('\'');
                    chars.next();
                } else {
                    return Some((value, &body[i + 1..]));
                }
            }
            '\\' if double => {
                let (ch, len) = escape(&body[i + 1..]).ok()?;
                value.push(ch);
                for _ in 0..len {
                    chars.next();
                }
            }
            c => value.push(c),
        }
    }
    None
}

/// The character a double-quoted escape stands for, and how many characters after the
/// backslash it took.
fn escape(after: &str) -> Result<(char, usize)> {
    let mut chars = after.chars();
    let c = chars.next().ok_or(Unsupported)?;
    let simple = match c {
        '0' => '\0',
        'a' => '\u{7}',
        'b' => '\u{8}',
        't' => '\t',
        'n' => '\n',
        'v' => '\u{b}',
        'f' => '\u{c}',
        'r' => '\r',
        'e' => '\u{1b}',
        ' ' => ' ',
        '"' => '"',
        '/' => '/',
        '\\' => '\\',
        'N' => '\u{85}',
        '_' => '\u{a0}',
        'L' => '\u{2028}',
        'P' => '\u{2029}',
        'x' | 'u' | 'U' => {
            let n = match c {
                'x' => 2,
                'u' => 4,
                _ => 8,
            };
            let hex = after.get(1..1 + n).ok_or(Unsupported)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Unsupported);
            }
            let code = u32::from_str_radix(hex, 16).map_err(|_| Unsupported)?;
            return Ok((char::from_u32(code).ok_or(Unsupported)?, 1 + n));
        }
        _ => return Err(Unsupported),
    };
    Ok((simple, 1))
}

/// Only spaces and a comment may follow a node on its line.
fn end_of_line(rest: &str) -> Result<()> {
    let trimmed = rest.trim_start_matches(' ');
    if trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len()) {
        Ok(())
    } else {
        Err(Unsupported)
    }
}

/// Splits a plain scalar (trailing spaces dropped) from what follows it: a comment, or in a
/// flow collection `,`, `]`, `}` or `:`.
fn plain_end(text: &str, in_flow: bool) -> (&str, &str) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if (b == b'#' && i > 0 && bytes[i - 1] == b' ')
            || (b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' '))
            || (in_flow && matches!(b, b',' | b']' | b'}' | b'[' | b'{' | b':'))
        {
            break;
        }
        i += 1;
    }
    let value = text[..i].trim_end_matches(' ');
    (value, &text[value.len()..])
}

/// Whether saphyr gives a plain scalar as a string: it is not null, a boolean or a number.
/// Text that might be read otherwise is `false` too (the caller gives up or types it).
fn plain_is_string(t: &str) -> bool {
    let Some(&first) = t.as_bytes().first() else {
        return false;
    };
    // A plain scalar cannot start with an indicator (saphyr refuses or reads something else).
    if matches!(
        first,
        b',' | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
            | b'?'
            | b':'
    ) {
        return false;
    }
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.' | b'~')) {
        let word = matches!(t, "null" | "Null" | "NULL")
            || ["true", "false", "yes", "no", "y", "n", "on", "off"]
                .iter()
                .any(|w| t.eq_ignore_ascii_case(w));
        return !word;
    }
    if first.is_ascii_digit() || first == b'-' || first == b'+' {
        // Two dots, or any letter but an exponent's or a radix's, make it no number.
        let dots = t.bytes().filter(|&b| b == b'.').count();
        let unsigned = t.trim_start_matches(['-', '+']);
        let radix = unsigned.len() > 1
            && unsigned.starts_with('0')
            && matches!(
                unsigned.as_bytes()[1],
                b'x' | b'X' | b'o' | b'O' | b'b' | b'B'
            );
        return !radix
            && !unsigned.is_empty()
            && unsigned.as_bytes()[0].is_ascii_digit()
            && (dots >= 2
                || t.bytes().any(|b| {
                    !(b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E' | b'_'))
                }));
    }
    false
}

/// Writes a plain scalar as saphyr types it, or gives up when unsure.
fn write_plain(out: &mut Vec<u8>, t: &str) -> Result<()> {
    if plain_is_string(t) {
        write_string(out, t);
        return Ok(());
    }
    match t {
        "null" | "Null" | "NULL" | "~" => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    for (w, v) in [
        ("true", true),
        ("yes", true),
        ("y", true),
        ("on", true),
        ("false", false),
        ("no", false),
        ("n", false),
        ("off", false),
    ] {
        if t.eq_ignore_ascii_case(w) {
            out.extend_from_slice(if v { b"true" } else { b"false" });
            return Ok(());
        }
    }
    // Decimal integers without a leading zero or `+`, within 64 bits.
    let digits = t.strip_prefix('-').unwrap_or(t);
    if !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
    {
        if t.starts_with('-') {
            if let Ok(v) = t.parse::<i64>() {
                let _ = serde_json::to_writer(&mut *out, &v);
                return Ok(());
            }
        } else if let Ok(v) = t.parse::<u64>() {
            let _ = serde_json::to_writer(&mut *out, &v);
            return Ok(());
        }
    }
    Err(Unsupported)
}

/// A one-line flow collection at the start of `text`, inside `depth` collections; the text
/// after it.
fn flow<'t>(text: &'t str, out: &mut Vec<u8>, depth: usize) -> Result<&'t str> {
    flow_depth(text, out, depth + 1)
}

fn flow_depth<'t>(text: &'t str, out: &mut Vec<u8>, depth: usize) -> Result<&'t str> {
    if depth > MAX_DEPTH {
        return Err(Unsupported);
    }
    let mapping = text.starts_with('{');
    let close = if mapping { '}' } else { ']' };
    out.push(if mapping { b'{' } else { b'[' });
    let mut rest = text[1..].trim_start_matches(' ');
    let mut first = true;
    let mut keys: Vec<String> = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(close) {
            out.push(close as u8);
            return Ok(after);
        }
        if !first {
            rest = rest
                .strip_prefix(',')
                .ok_or(Unsupported)?
                .trim_start_matches(' ');
            if rest.starts_with(close) || rest.starts_with(',') {
                // A trailing or empty entry: left to saphyr.
                return Err(Unsupported);
            }
            out.push(b',');
        }
        first = false;
        if mapping {
            let (key, after) = flow_scalar_text(rest)?;
            if keys.len() >= MAX_KEYS || keys.contains(&key) {
                return Err(Unsupported);
            }
            write_string(out, &key);
            keys.push(key);
            let after = after.trim_start_matches(' ');
            let after = after.strip_prefix(':').ok_or(Unsupported)?;
            if !after.starts_with(' ') || rest.len() - after.len() > MAX_KEY_SPAN {
                return Err(Unsupported);
            }
            out.push(b':');
            rest = flow_value(after.trim_start_matches(' '), out, depth)?;
        } else {
            rest = flow_value(rest, out, depth)?;
            if rest.trim_start_matches(' ').starts_with(':') {
                return Err(Unsupported);
            }
        }
        rest = rest.trim_start_matches(' ');
    }
}

/// A value inside a flow collection; the text after it.
fn flow_value<'t>(text: &'t str, out: &mut Vec<u8>, depth: usize) -> Result<&'t str> {
    match text.as_bytes().first() {
        Some(b'[' | b'{') => flow_depth(text, out, depth + 1),
        Some(b'"' | b'\'') => {
            let (value, rest) = quoted_one_line(text).ok_or(Unsupported)?;
            write_string(out, &value);
            Ok(rest)
        }
        _ => {
            let (value, rest) = plain_end(text, true);
            if value.is_empty()
                || value.starts_with(['-', '?', ':', '&', '*', '!', '|', '>', '#', '%', '@', '`'])
            {
                return Err(Unsupported);
            }
            write_plain(out, value)?;
            Ok(rest)
        }
    }
}

/// A key inside a flow mapping, as text.
fn flow_scalar_text(text: &str) -> Result<(String, &str)> {
    match text.as_bytes().first() {
        Some(b'"' | b'\'') => quoted_one_line(text).ok_or(Unsupported),
        _ => {
            let (value, rest) = plain_end(text, true);
            if !plain_is_string(value) || value.starts_with(['-', '?', ':']) || value == "<<" {
                return Err(Unsupported);
            }
            Ok((value.to_owned(), rest))
        }
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    // Writing a `str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The saphyr path, as `decode` takes it when the fast path gives up.
    fn saphyr(text: &str) -> Vec<(serde_json::Value, usize)> {
        super::super::yaml::documents(text, serde_saphyr::Options::default())
            .unwrap()
            .iter()
            .map(|(j, l)| (serde_json::from_str(j).unwrap(), l))
            .collect()
    }

    fn saphyr_result(text: &str) -> std::result::Result<(), serde_saphyr::Error> {
        super::super::yaml::documents(text, serde_saphyr::Options::default()).map(|_| ())
    }

    fn fast(text: &str) -> Option<Vec<(serde_json::Value, usize)>> {
        Some(
            documents(text)?
                .iter()
                .map(|(j, l)| (serde_json::from_str(j).unwrap(), l))
                .collect(),
        )
    }

    #[test]
    fn every_real_yaml_catalog_takes_the_fast_path_with_saphyrs_values() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fbc-samples/real");
        let mut yaml = 0;
        for file in crate::fbc::load::catalog_files(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            if !crate::fbc::decode::is_yaml(text.as_bytes()) {
                continue;
            }
            yaml += 1;
            let fast = fast(&text).unwrap_or_else(|| panic!("{} fell back", file.display()));
            assert_eq!(fast, saphyr(&text), "{}", file.display());
        }
        assert!(yaml >= 10, "{yaml} YAML files");
    }

    #[test]
    fn the_forms_it_reads_give_saphyrs_values() {
        let cases = [
            "a: b\n",
            "---\nschema: olm.package\nname: p\n---\n# c\nschema: x\n",
            "a:\n  b: 1\n  c: -2\n  d: 1.0.0\n  e: null\n  f: ~\n  g: yes\n  h: Off\n",
            "a:\n- 1\n- b: c\n  d: e\n-\n  f: g\n- - h\n  - i\n",
            "a: 'it''s'\n",
            "b: \"x\\ty\\u00e9\"\n",
            "c: \"long\n  folded\n\n  text\"\n",
            "a: |\n  line 1\n\n    line 2\nb: |-\n  x\n\nc: |+\n  y\n\nd: z\n",
            "a: plain\n  continued\n\n  again # comment\nb: [1, x, 'y', {k: v, l: [m]}]\nc: {}\nd: []\n",
            "a: http://example.com/x#y\nb: v1.0.0+build\nc: 'quoted: yes'\n",
            "  indented: root\n  other: 1\n",
        ];
        for text in cases {
            assert_eq!(fast(text), Some(saphyr(text)), "{text:?}");
        }
    }

    /// Runs `work` on a thread with catalogd's unpack stack (2 MiB), as catalogd does.
    fn on_small_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(work)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn deep_nesting_is_left_to_saphyr_which_refuses_it_within_a_small_stack() {
        // The review's file: 200 KB that overflowed the stack (the process aborted) before the
        // fast path counted its depth.
        let text = format!("a:\n{}x\n", "- ".repeat(100_000));
        let (fast, full) = on_small_stack(move || {
            let fast = documents(&text).is_some();
            (
                fast,
                crate::fbc::decode::yaml_documents(text.as_bytes()).map(|_| ()),
            )
        });
        assert!(!fast);
        let err = full.unwrap_err();
        assert!(err.message.contains("depth"), "{}", err.message);
        // Flow collections and block mappings count towards the same depth.
        let flow = format!("a: {}{}\n", "[".repeat(100), "]".repeat(100));
        let mappings: String = (0..100)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect::<String>()
            + &" ".repeat(100)
            + "v: 1\n";
        for text in [flow, mappings] {
            assert!(on_small_stack(move || documents(&text).is_none()));
        }
    }

    #[test]
    fn up_to_saphyrs_depth_both_paths_agree_on_a_small_stack() {
        for depth in (MAX_DEPTH - 3)..=(MAX_DEPTH + 3) {
            let texts = [
                // `a:` is one mapping; each dash a sequence.
                format!("a:\n{}x\n", "- ".repeat(depth - 1)),
                format!("a: {}{}\n", "[".repeat(depth - 1), "]".repeat(depth - 1)),
                format!("a:\n{}[1]\n", "- ".repeat(depth - 2)),
            ];
            for text in texts {
                let (fast, full) = on_small_stack(move || {
                    let (fast, saphyr) = crate::fbc::decode::yaml_both(&text);
                    let values =
                        |d: &Documents| d.iter().map(|(j, _)| j.to_owned()).collect::<Vec<_>>();
                    (fast.map(|d| values(&d)), saphyr.map(|d| values(&d)))
                });
                match (fast, full) {
                    (Some(fast), Ok(saphyr)) => {
                        assert!(depth <= MAX_DEPTH, "{depth}");
                        assert_eq!(fast, saphyr, "{depth}");
                    }
                    (None, Err(e)) => assert!(depth > MAX_DEPTH, "{depth}: {e:?}"),
                    (fast, saphyr) => panic!("{depth}: fast {fast:?}, saphyr {saphyr:?}"),
                }
            }
        }
    }

    #[test]
    fn a_flow_mapping_of_many_keys_is_left_to_saphyr_which_reads_it_in_linear_time() {
        // 200,000 keys: each compared with every earlier one took hours.
        let keys: Vec<String> = (0..200_000).map(|i| format!("k{i}: {i}")).collect();
        let text = format!("a: {{{}}}\n", keys.join(", "));
        assert!(documents(&text).is_none());
        let docs = crate::fbc::decode::yaml_documents(text.as_bytes()).unwrap();
        let (json, _) = docs.iter().next().unwrap();
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v["a"].as_object().unwrap().len(), 200_000);
        // At the cap, the fast path still reads it.
        let keys: Vec<String> = (0..MAX_KEYS).map(|i| format!("k{i}: {i}")).collect();
        let text = format!("a: {{{}}}\n", keys.join(", "));
        assert_eq!(fast(&text), Some(saphyr(&text)));
    }

    #[test]
    fn lines_are_read_one_at_a_time() {
        let text = "a: b\n\n  c\n";
        let mut lines = Lines::new(text);
        let mut seen = Vec::new();
        while let Some(l) = lines.peek() {
            seen.push((l.number, l.indent, l.rest));
            lines.advance();
        }
        assert_eq!(seen, [(1, 0, "a: b"), (2, 0, ""), (3, 2, "c")]);
        assert!(Lines::new("").peek().is_none());
        // Runs of empty lines are stepped over at once, numbers kept.
        let mut lines = Lines::new("a\n\n\n\nb\n\n");
        assert_eq!(lines.advance_past_empty(), 4);
        let b = lines.peek().unwrap_or_else(|| unreachable!());
        assert_eq!((b.number, b.rest), (5, "b"));
        assert_eq!(lines.advance_past_empty(), 2);
        assert!(lines.peek().is_none());
    }

    #[test]
    fn what_it_does_not_read_exactly_is_left_to_saphyr() {
        let cases = [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "? a\n: b\n",
            "a: >\n  folded\n",
            "a: 1.5\n",
            "a: 0x1F\n",
            "a: 007\n",
            "a: [1,\n  2]\n",
            "a: b\na: c\n",
            "a: b: c\n",
            "a:\tb\n",
            "a: b\r\n",
            "a: b",
            "%YAML 1.2\n---\na: b\n",
            "a: 1\n...\n",
            "<<: {a: 1}\n",
            "- a\n",
            "a: b\n`c: d\n",
            "a: p # comment\n  continued\n",
            "a: b\n@c: d\n",
        ];
        for text in cases {
            assert!(fast(text).is_none(), "{text:?}");
        }
        // Found by the fuzz target yaml_nest: keys longer than YAML's 1024 characters, which
        // saphyr refuses, and keys just within.
        let long = [
            format!("{}: v\n", "v1.0.0".repeat(200)),
            format!("a: {{{}: v}}\n", "k".repeat(1100)),
            format!("'{}': v\n", "q".repeat(1100)),
        ];
        for text in long {
            assert!(fast(&text).is_none(), "{text:?}");
            assert!(saphyr_result(&text).is_err(), "{text:?}");
        }
        // Found by the fuzz target yaml_json: a `|+` scalar of empty lines at the end of the
        // file, which the fast path read as empty (saphyr keeps the line break).
        assert!(fast("/3/3:\n- |+\n\n").is_none());
        let within = format!("{}: v\n", "k".repeat(900));
        assert_eq!(fast(&within), Some(saphyr(&within)));
    }
}
