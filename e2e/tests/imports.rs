//! No import circles between the files of one crate (no cluster needed): a file that uses
//! another file's items, directly or through others, is never used back by it. Circles make a
//! crate hard to split and its files hard to read one at a time.
//!
//! Edges are the `crate::` and `super::` paths of each file's non-test code (comments and
//! `#[cfg(test)]` modules left out), resolved to the file of the longest module they name. A
//! file's use of its own ancestors' files (`super::Error` in a child of `mod.rs`) is not an
//! edge: a parent module holding what its children share is not a circle.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// The library source folders of the workspace.
fn crate_roots() -> Vec<PathBuf> {
    let root = olm_e2e::repo_root();
    let mut roots = vec![
        root.join("e2e/src"),
        root.join("cluster/src"),
        root.join("testkit/src"),
    ];
    let crates = std::fs::read_dir(root.join("crates")).unwrap();
    for entry in crates {
        let src = entry.unwrap().path().join("src");
        if src.join("lib.rs").exists() {
            roots.push(src);
        }
    }
    roots.sort();
    roots
}

/// Every module file under `src` (binaries left out), by module path.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(src).unwrap();
            if path.is_dir() {
                if rel != Path::new("bin") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || rel == Path::new("main.rs") {
                continue;
            }
            let mut module: Module = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|l| l == "mod" || l == "lib") {
                module.pop();
            }
            out.insert(module, path);
        }
    }
    out
}

/// The file's code without comments and without its `#[cfg(test)]` modules.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let line = line.split(" // ").next().unwrap_or_default();
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths written from `rest` on (after `crate::` or `super::`): `a::b::C`, or each member
/// of a `{...}` group, recursively.
fn paths(rest: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut s = rest;
    loop {
        let s_trim = s.trim_start();
        if let Some(group) = s_trim.strip_prefix('{') {
            let mut depth = 1;
            let mut end = group.len();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let inner = &group[..end];
            let mut members = Vec::new();
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        members.push(&inner[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            members.push(&inner[start..]);
            let mut out = Vec::new();
            for member in members.into_iter().filter(|m| !m.trim().is_empty()) {
                for tail in paths(member) {
                    let mut path = segments.clone();
                    path.extend(tail);
                    out.push(path);
                }
            }
            return out;
        }
        let ident: String = s_trim.chars().take_while(|c| is_ident(*c)).collect();
        if ident.is_empty() {
            return vec![segments];
        }
        s = &s_trim[ident.len()..];
        if ident != "self" {
            segments.push(ident);
        }
        match s.strip_prefix("::") {
            Some(next) => s = next,
            None => return vec![segments],
        }
    }
}

/// The modules `file` (module `me`) names, as absolute paths within its crate.
fn references(me: &Module, text: &str) -> Vec<Module> {
    let code = code(text);
    let mut out = Vec::new();
    for (i, _) in code.match_indices("::") {
        let before = &code[..i];
        let word_start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_ident(*c) || *c == ':')
            .last()
            .map_or(i, |(j, _)| j);
        let head = &code[word_start..i];
        if head.contains("::") {
            continue;
        }
        let base: Module = match head {
            "crate" => Vec::new(),
            "super" => {
                // `super` of a `mod.rs` is its folder's parent; of `a/b.rs`, `a`.
                let mut base = me.clone();
                base.pop();
                base
            }
            _ => continue,
        };
        for tail in paths(&code[i + 2..]) {
            let mut path = base.clone();
            // `super::super::x`
            let mut tail = tail.into_iter().peekable();
            while tail.peek().is_some_and(|s| s == "super") {
                tail.next();
                path.pop();
            }
            path.extend(tail);
            out.push(path);
        }
    }
    out
}

/// The file module that `path` lands in: its longest prefix that is a module.
fn owner<'a>(modules: &'a BTreeMap<Module, PathBuf>, path: &Module) -> Option<&'a Module> {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// Strongly connected groups of more than one file (Tarjan's algorithm).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.clone());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.out.push(group);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out
}

/// The import edges between the files of the crate at `src`.
fn edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules(src);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (me, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let entry = edges.entry(me.clone()).or_default();
        for path in references(me, &text) {
            let Some(target) = owner(&modules, &path) else {
                continue;
            };
            // Not itself, nor an ancestor of it, nor a descendant of it.
            if target == me || me.starts_with(target) || target.starts_with(me) {
                continue;
            }
            entry.insert(target.clone());
        }
    }
    edges
}

fn shown(group: &[Module]) -> String {
    group
        .iter()
        .map(|m| {
            if m.is_empty() {
                "lib".to_owned()
            } else {
                m.join("/")
            }
        })
        .collect::<Vec<_>>()
        .join(" <-> ")
}

#[test]
fn no_file_of_a_crate_is_used_back_by_a_file_it_uses() {
    let mut found = Vec::new();
    for src in crate_roots() {
        let edges = edges(&src);
        assert!(!edges.is_empty(), "no modules read in {}", src.display());
        for group in circles(&edges) {
            found.push(format!("{}: {}", src.display(), shown(&group)));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_a_circle_through_a_group_import_and_ignores_parents() {
    let a: Module = vec!["a".into()];
    let b: Module = vec!["b".into()];
    let refs = references(&a, "use crate::{b::{self, Thing}, c};\n");
    assert!(refs.contains(&vec!["b".to_owned(), "Thing".to_owned()]));
    assert!(refs.contains(&vec!["c".to_owned()]));
    let child: Module = vec!["a".into(), "x".into()];
    assert_eq!(
        references(&child, "fn f() -> super::Error { todo() }\n"),
        vec![vec!["a".to_owned(), "Error".to_owned()]]
    );
    // Comments and tests do not count.
    assert!(references(&a, "// crate::b::X\n#[cfg(test)]\nuse crate::b::Y;\n").is_empty());
    let edges = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(circles(&edges), vec![vec![a, b]]);
}
