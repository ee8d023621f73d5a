//! gix's HTTP backend with a byte budget: every response body of one operation (the
//! handshake, `ls-refs`, the pack) counts against it, and reading stops past it. Over ssh the
//! session reader bounds what the server sends; over https gix would otherwise read an endless
//! ref advertisement into memory until the timeout.

use std::io::{BufRead, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gix::protocol::transport::client::blocking_io::http::{
    self, GetResponse, Http, PostBodyDataKind, PostResponse,
};

/// What one operation may read, shared by its requests.
#[derive(Debug)]
pub struct Budget {
    read: AtomicU64,
    limit: u64,
    exceeded: AtomicBool,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            read: AtomicU64::new(0),
            limit,
            exceeded: AtomicBool::new(false),
        })
    }

    /// The bytes it allows.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Whether reading stopped because the budget ran out.
    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }

    fn take(&self, n: usize) -> std::io::Result<()> {
        let total = self.read.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if total > self.limit {
            self.exceeded.store(true, Ordering::Relaxed);
            return Err(self.error());
        }
        Ok(())
    }

    fn error(&self) -> std::io::Error {
        std::io::Error::other(format!(
            "the server sent more than {} bytes; reading stopped",
            self.limit
        ))
    }
}

/// A response body counted against a [`Budget`].
pub struct Counted<R> {
    inner: R,
    budget: Arc<Budget>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.budget.exceeded() {
            return Err(self.budget.error());
        }
        let n = self.inner.read(buf)?;
        self.budget.take(n)?;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.budget.exceeded() {
            return Err(self.budget.error());
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        // Past the budget, the next fill_buf or read fails.
        let _ = self.budget.take(amt);
        self.inner.consume(amt);
    }
}

/// gix's reqwest backend, every response body of it counted against `budget`.
pub struct BoundedHttp {
    inner: http::reqwest::Remote,
    budget: Arc<Budget>,
}

impl BoundedHttp {
    /// The reqwest backend within `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        Self {
            inner: http::reqwest::Remote::default(),
            budget,
        }
    }

    fn counted<B>(&self, body: B) -> Counted<B> {
        Counted {
            inner: body,
            budget: self.budget.clone(),
        }
    }
}

type Inner = http::reqwest::Remote;

impl Http for BoundedHttp {
    // Headers are bounded by hyper's own limits.
    type Headers = <Inner as Http>::Headers;
    type ResponseBody = Counted<<Inner as Http>::ResponseBody>;
    type PostBody = <Inner as Http>::PostBody;

    fn get(
        &mut self,
        url: &str,
        base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::Result<GetResponse<Self::Headers, Self::ResponseBody>> {
        let response = self.inner.get(url, base_url, headers)?;
        Ok(GetResponse {
            headers: response.headers,
            body: self.counted(response.body),
        })
    }

    fn post(
        &mut self,
        url: &str,
        base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        body: PostBodyDataKind,
    ) -> gix::Result<PostResponse<Self::Headers, Self::ResponseBody, Self::PostBody>> {
        let response = self.inner.post(url, base_url, headers, body)?;
        Ok(PostResponse {
            post_body: response.post_body,
            headers: response.headers,
            body: self.counted(response.body),
        })
    }

    fn configure(&mut self, config: &dyn std::any::Any) -> gix::Result {
        self.inner.configure(config)
    }

    fn redirected_base_url(&self) -> Option<String> {
        self.inner.redirected_base_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_budget_fail_and_say_so() {
        let budget = Budget::new(10);
        let mut body = Counted {
            inner: std::io::Cursor::new(vec![b'x'; 100]),
            budget: budget.clone(),
        };
        let mut buf = [0u8; 8];
        assert_eq!(body.read(&mut buf).unwrap(), 8);
        assert!(!budget.exceeded());
        assert!(body.read(&mut buf).is_err());
        assert!(budget.exceeded());
        assert!(body.fill_buf().is_err(), "and it stays stopped");
        // Two bodies of one operation share the budget.
        let shared = Budget::new(10);
        for _ in 0..2 {
            let mut b = Counted {
                inner: std::io::Cursor::new(vec![b'y'; 6]),
                budget: shared.clone(),
            };
            let _ = b.fill_buf().map(|d| d.len()).map(|n| b.consume(n));
        }
        assert!(shared.exceeded());
    }
}
