//! The managers' images, assembled from the cargo build with no daemon (no Docker engine runs
//! here, and no base image can be pulled): the layout of the `Dockerfile`'s targets (the
//! binary at `/<name>` as the entrypoint, the non-root user 65532, a CA bundle), plus what a
//! glibc build needs that the Dockerfile's static musl build does not: the shared libraries
//! `ldd` names and the dynamic loader, at the paths the binary asks for them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::images::{Entry, Layer, tar_layer};
use crate::{Error, Result};

/// The user the Dockerfile's targets run as (distroless's `nonroot`).
pub const USER: &str = "65532:65532";

/// An image to push: its one layer's entries and what it runs.
#[derive(Debug, Clone)]
pub struct Assembled {
    /// The files of its layer.
    pub entries: Vec<Entry>,
    /// Its entrypoint, `["/<name>"]`.
    pub entrypoint: Vec<String>,
    /// Its user.
    pub user: String,
}

impl Assembled {
    /// Its layer (a plain tar).
    pub fn layer(&self) -> Layer {
        tar_layer(&self.entries)
    }

    /// The config's `config` (what a container of it runs).
    pub fn run_config(&self) -> serde_json::Value {
        serde_json::json!({
            "Entrypoint": self.entrypoint,
            "User": self.user,
            // Programs the manager runs (the provisioner's helm and kustomize) are looked up
            // where the Dockerfile puts them.
            "Env": ["PATH=/usr/local/bin:/"],
        })
    }

    /// This image with the static program at `host` as `usr/local/bin/<name>`, where the
    /// Dockerfile's provisioner target copies helm and kustomize.
    pub fn with_tool(mut self, host: &Path, name: &str) -> Result<Assembled> {
        let bytes = std::fs::read(host)
            .map_err(|e| Error::Fixture(format!("reading {}: {e}", host.display())))?;
        for dir in ["usr", "usr/local", "usr/local/bin"] {
            if !self
                .entries
                .iter()
                .any(|e| matches!(e, Entry::Dir(d) if d == dir))
            {
                self.entries.push(Entry::Dir(dir.into()));
            }
        }
        self.entries
            .push(Entry::Executable(format!("usr/local/bin/{name}"), bytes));
        Ok(self)
    }

    /// The paths of its regular files, sorted.
    pub fn files(&self) -> Vec<&str> {
        let mut files: Vec<&str> = self
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::File(p, _) | Entry::Executable(p, _) => Some(p.as_str()),
                _ => None,
            })
            .collect();
        files.sort_unstable();
        files
    }
}

/// The shared objects `ldd` lists, by the path they are loaded from (the loader by its own
/// absolute path; the kernel's vDSO, which no file holds, left out).
pub fn libraries(ldd: &str) -> Vec<PathBuf> {
    ldd.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, resolved)) => resolved.trim().split(' ').next()?,
                None => line.split(' ').next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// The image of the manager binary at `binary`, named `name` (`/<name>` in the image).
pub fn assemble(binary: &Path, name: &str) -> Result<Assembled> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| Error::Fixture(format!("reading {}: {e}", path.display())))
    };
    let ldd = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| Error::Fixture(format!("ldd {}: {e}", binary.display())))?;
    // A static binary: `ldd` says so and fails; it needs no library.
    let listed = String::from_utf8_lossy(&ldd.stdout);
    if let Some(missing) = listed.lines().find(|l| l.contains("not found")) {
        return Err(Error::Fixture(format!(
            "{} needs a library this machine lacks: {}",
            binary.display(),
            missing.trim()
        )));
    }
    let libraries = if ldd.status.success() {
        libraries(&listed)
    } else {
        Vec::new()
    };
    let mut entries = vec![Entry::Executable(name.to_owned(), read(binary)?)];
    let mut dirs: Vec<String> = Vec::new();
    for library in &libraries {
        let inside = library.to_string_lossy().trim_start_matches('/').to_owned();
        // Every parent directory, once, before the file.
        let mut parent = PathBuf::new();
        for part in Path::new(&inside).parent().into_iter().flat_map(Path::iter) {
            parent.push(part);
            let dir = parent.to_string_lossy().into_owned();
            if !dirs.contains(&dir) {
                dirs.push(dir.clone());
                entries.push(Entry::Dir(dir));
            }
        }
        // The file itself, whatever links lead to it on this machine.
        entries.push(Entry::Executable(inside, read(library)?));
    }
    entries.push(Entry::Dir("etc".into()));
    entries.push(Entry::File(
        "etc/passwd".into(),
        b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
            .to_vec(),
    ));
    entries.push(Entry::File(
        "etc/group".into(),
        b"root:x:0:\nnonroot:x:65532:\n".to_vec(),
    ));
    // Registries and the API server over TLS: the trust store distroless ships, from this
    // machine's (Debian's ca-certificates).
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if bundle.is_file() {
        entries.push(Entry::Dir("etc/ssl".into()));
        entries.push(Entry::Dir("etc/ssl/certs".into()));
        entries.push(Entry::File(
            "etc/ssl/certs/ca-certificates.crt".into(),
            read(bundle)?,
        ));
    }
    Ok(Assembled {
        entries,
        entrypoint: vec![format!("/{name}")],
        user: USER.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_each_library_by_its_path_and_the_loader() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd3b5f2000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0e4c000000)
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f0e4bf00000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e4bc00000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e4c100000)
";
        assert_eq!(
            libraries(ldd),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libm.so.6",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2",
            ]
            .map(PathBuf::from)
        );
        assert!(libraries("\tnot a dynamic executable\n").is_empty());
        assert!(libraries("\tlibmissing.so => not found\n").is_empty());
    }
}
