//! What a rendering child may use, and when it is stopped (pure): its time, its memory (the
//! resident set read from `/proc`, with the kernel's data limit behind it), and its output.
//! Helm and kustomize run untrusted templates: a loop, a string doubled until memory runs out,
//! or a 100 MB manifest must end as a reason, never as a stalled or killed provisioner.

use std::time::Duration;

/// The bounds of one render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long it may run.
    pub time: Duration,
    /// The most resident memory it may hold, in bytes.
    pub memory: u64,
    /// The most it may print on standard output, in bytes (its manifests).
    pub output: u64,
}

/// The most a child may print on standard error (its error message, kept for the condition).
pub const MAX_STDERR: u64 = 64 * 1024;

/// Why a child was stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// It ran out of time.
    #[error("it ran for more than {0:?} (--render-timeout-seconds) and was stopped")]
    Time(Duration),
    /// It held more memory than allowed.
    #[error(
        "it used more than {limit} bytes of memory (--render-memory-bytes) and was stopped (it held {used})"
    )]
    Memory {
        /// The limit.
        limit: u64,
        /// What it held when it was seen.
        used: u64,
    },
    /// The kernel refused it memory at the limit (it died asking for more).
    #[error(
        "it ran out of the {0} bytes of memory it may use (--render-memory-bytes) and was stopped"
    )]
    OutOfMemory(u64),
    /// It printed more than allowed.
    #[error("it printed more than {0} bytes of manifests (--max-content-bytes) and was stopped")]
    Output(u64),
}

/// What a child has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// How long it has run.
    pub elapsed: Duration,
    /// Its resident memory when last read, in bytes.
    pub memory: u64,
    /// What it has printed on standard output, in bytes.
    pub output: u64,
}

impl Limits {
    /// Whether a child that has done `seen` is stopped, and why (time first: a child past its
    /// time is stopped for that, whatever else it did).
    pub fn check(&self, seen: &Seen) -> Option<Stopped> {
        if seen.elapsed > self.time {
            Some(Stopped::Time(self.time))
        } else if seen.memory > self.memory {
            Some(Stopped::Memory {
                limit: self.memory,
                used: seen.memory,
            })
        } else if seen.output > self.output {
            Some(Stopped::Output(self.output))
        } else {
            None
        }
    }

    /// The Go runtime's soft memory limit for the child (`GOMEMLIMIT`): below the hard limit,
    /// so that its collector works harder before it is stopped.
    pub fn go_memory_limit(&self) -> u64 {
        self.memory / 4 * 3
    }
}

/// The resident memory in a `/proc/<pid>/status` text, in bytes (`VmRSS`, in kB).
pub fn resident(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb.saturating_mul(1024))
}

/// Whether a child's standard error says Go's runtime died for want of memory (the kernel's
/// data limit refused it more): a line of the runtime's own `fatal error:`, never a message a
/// template prints (Helm prints those after `Error:`).
pub fn out_of_memory(stderr: &str) -> bool {
    stderr.lines().any(|line| {
        line.starts_with("fatal error:")
            && (line.contains("out of memory") || line.contains("cannot allocate memory"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        time: Duration::from_secs(10),
        memory: 1000,
        output: 100,
    };

    #[test]
    fn within_every_limit_it_runs_on() {
        let seen = Seen {
            elapsed: Duration::from_secs(10),
            memory: 1000,
            output: 100,
        };
        assert_eq!(LIMITS.check(&seen), None);
    }

    #[test]
    fn past_any_limit_it_is_stopped_saying_which() {
        let over = |elapsed: u64, memory: u64, output: u64| {
            LIMITS.check(&Seen {
                elapsed: Duration::from_secs(elapsed),
                memory,
                output,
            })
        };
        assert_eq!(
            over(11, 2000, 200),
            Some(Stopped::Time(Duration::from_secs(10)))
        );
        assert_eq!(
            over(1, 1001, 200),
            Some(Stopped::Memory {
                limit: 1000,
                used: 1001
            })
        );
        assert_eq!(over(1, 1, 101), Some(Stopped::Output(100)));
        assert!(
            Stopped::Output(100)
                .to_string()
                .contains("printed more than 100 bytes")
        );
    }

    #[test]
    fn the_go_limit_is_below_the_hard_one() {
        assert_eq!(LIMITS.go_memory_limit(), 750);
    }

    #[test]
    fn only_the_go_runtime_running_out_of_memory_is_out_of_memory() {
        for died in [
            "fatal error: runtime: out of memory\n\nruntime stack:\n",
            "fatal error: out of memory allocating heap arena metadata\n\nruntime stack:\n",
            "runtime: mmap failed\nfatal error: runtime: cannot allocate memory\n",
        ] {
            assert!(out_of_memory(died), "{died}");
        }
        for said in [
            "Error: execution error at (c/templates/t.yaml:1:3): out of memory",
            "Error: fatal error: out of memory",
            "",
        ] {
            assert!(!out_of_memory(said), "{said}");
        }
    }

    #[test]
    fn resident_memory_is_read_from_proc_status() {
        let status = "Name:\thelm\nVmPeak:\t  900 kB\nVmRSS:\t    2048 kB\nThreads:\t5\n";
        assert_eq!(resident(status), Some(2048 * 1024));
        assert_eq!(resident("Name:\thelm\n"), None);
    }
}
