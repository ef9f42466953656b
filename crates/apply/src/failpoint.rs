//! Failure injection for the crash and rollback tests: `MCO_FAILPOINT=<n>:error` makes the n-th
//! failpoint of an apply return an error, `<n>:crash` aborts the process there (like a power cut
//! for everything the process wrote). Points are counted in execution order, so a test can walk
//! every point of an update one by one.

use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};

/// What happens when the chosen point is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Error,
    Crash,
}

/// The failpoint counter of one apply.
#[derive(Debug, Default)]
pub struct Failpoints {
    trigger: Option<(usize, Action)>,
    reached: AtomicUsize,
}

impl Failpoints {
    pub fn new(trigger: Option<(usize, Action)>) -> Self {
        Failpoints { trigger, reached: AtomicUsize::new(0) }
    }

    /// Parses `<n>:error` or `<n>:crash` (n counts from 1).
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        let (n, action) = spec.split_once(':').context("expected <n>:error or <n>:crash")?;
        let n: usize = n.parse().with_context(|| format!("failpoint number {n:?}"))?;
        let action = match action {
            "error" => Action::Error,
            "crash" => Action::Crash,
            other => bail!("failpoint action {other:?} is not error or crash"),
        };
        if n == 0 {
            bail!("failpoints count from 1");
        }
        Ok(Self::new(Some((n, action))))
    }

    /// From `MCO_FAILPOINT`, if set.
    pub fn from_env() -> anyhow::Result<Self> {
        match std::env::var("MCO_FAILPOINT") {
            Ok(spec) => Self::parse(&spec).context("MCO_FAILPOINT"),
            Err(_) => Ok(Self::default()),
        }
    }

    /// Marks one point; fails or aborts if it is the chosen one.
    pub fn hit(&self, site: &str) -> anyhow::Result<()> {
        let n = self.reached.fetch_add(1, Ordering::SeqCst) + 1;
        match self.trigger {
            Some((at, Action::Error)) if at == n => bail!("failpoint {n} ({site}): injected failure"),
            Some((at, Action::Crash)) if at == n => {
                eprintln!("failpoint {n} ({site}): crashing");
                std::process::abort()
            }
            _ => Ok(()),
        }
    }

    /// How many points were passed so far.
    pub fn reached(&self) -> usize {
        self.reached.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chosen_point_fails_and_only_it() {
        let fp = Failpoints::parse("2:error").unwrap();
        fp.hit("a").unwrap();
        assert_eq!(fp.hit("b").unwrap_err().to_string(), "failpoint 2 (b): injected failure");
        fp.hit("c").unwrap();
        assert_eq!(fp.reached(), 3);
        for bad in ["x", "0:error", "1:boom", "-1:crash"] {
            assert!(Failpoints::parse(bad).is_err(), "{bad}");
        }
    }
}
