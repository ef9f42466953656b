//! Leader election over a `coordination.k8s.io/v1` Lease, with client-go's rules: a candidate
//! takes a lease that is free or expired (`renewTime + leaseDurationSeconds` in the past), the
//! holder renews it every retry period, and a holder that could not renew for the renew deadline
//! must stop working. Only one controller instance then writes to the cluster at a time.
//!
//! Unlike client-go, expiry is judged from the lease's own timestamps rather than from when this
//! candidate last saw it change, so candidates rely on roughly synchronized clocks.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// How long a lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for Timing {
    /// OpenShift's recommended values (`leaderelection.LeaderElectionDefaulting`), which the
    /// machine-config-controller uses: survive a 60 s API server outage without losing the lease.
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(137),
            renew_deadline: Duration::from_secs(107),
            retry_period: Duration::from_secs(26),
        }
    }
}

/// What a candidate may do with a lease as it finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Free, expired or already ours: write it with us as holder.
    Claim,
    /// Someone else holds it and it has not expired.
    Wait { holder: String },
}

/// Decides [`Step`] for `identity` at `now`.
pub fn step(lease: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Step {
    let Some(lease) = lease else { return Step::Claim };
    let holder = lease.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == identity {
        return Step::Claim;
    }
    let renewed = lease.renew_time.as_ref().or(lease.acquire_time.as_ref()).map(|t| t.0);
    let duration = SignedDuration::from_secs(lease.lease_duration_seconds.unwrap_or_default().into());
    match renewed {
        Some(renewed) if renewed + duration > now => Step::Wait { holder: holder.to_string() },
        _ => Step::Claim,
    }
}

/// The lease after `identity` claims it at `now`: a renewal keeps the acquire time and the
/// transition count; a change of holder counts one more transition.
pub fn claimed(lease: Option<&LeaseSpec>, identity: &str, now: Timestamp, lease_duration: Duration) -> LeaseSpec {
    let previous = lease.cloned().unwrap_or_default();
    let renewal = previous.holder_identity.as_deref() == Some(identity);
    let transitions = match (lease, renewal) {
        (None, _) => 0,
        (Some(_), true) => previous.lease_transitions.unwrap_or_default(),
        (Some(_), false) => previous.lease_transitions.unwrap_or_default() + 1,
    };
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX)),
        acquire_time: if renewal { previous.acquire_time.clone() } else { Some(MicroTime(now)) },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..previous
    }
}

/// The lease released by its holder: no holder, so the next candidate need not wait for expiry.
pub fn released(lease: &LeaseSpec) -> LeaseSpec {
    LeaseSpec { holder_identity: Some(String::new()), ..lease.clone() }
}

/// A candidate for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
}

/// Why a leader stopped being one.
#[derive(Debug, thiserror::Error)]
#[error("leader election lost: lease {namespace}/{name} not renewed for {deadline:?} (last error: {last})")]
pub struct Lost {
    namespace: String,
    name: String,
    deadline: Duration,
    last: String,
}

impl LeaderElector {
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str, timing: Timing) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            timing,
        }
    }

    /// Returns once this candidate holds the lease. API errors (a missing namespace, an
    /// unreachable server) are logged and retried, as client-go does.
    pub async fn acquire(&self) {
        loop {
            match self.try_claim().await {
                Ok(Step::Claim) => return,
                Ok(Step::Wait { holder }) => {
                    tracing::debug!(lease = %self.name, %holder, "lease held by another candidate")
                }
                Err(e) => tracing::warn!(lease = %self.name, "acquiring the lease: {e}"),
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns when it could not be renewed within the
    /// renew deadline. The caller must then stop acting as the leader.
    pub async fn hold(&self) -> Lost {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            let last = match self.try_claim().await {
                Ok(Step::Claim) => {
                    renewed = Instant::now();
                    continue;
                }
                Ok(Step::Wait { holder }) => format!("held by {holder}"),
                Err(e) => e.to_string(),
            };
            tracing::warn!(lease = %self.name, "renewing the lease: {last}");
            if renewed.elapsed() >= self.timing.renew_deadline {
                return Lost {
                    namespace: self.api.namespace().unwrap_or_default().to_string(),
                    name: self.name.clone(),
                    deadline: self.timing.renew_deadline,
                    last,
                };
            }
        }
    }

    /// Gives the lease up if this candidate holds it.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else { return Ok(()) };
        let Some(spec) = lease.spec.as_ref().filter(|s| s.holder_identity.as_deref() == Some(&self.identity)) else {
            return Ok(());
        };
        lease.spec = Some(released(spec));
        self.api.replace(&self.name, &PostParams::default(), &lease).await?;
        Ok(())
    }

    /// One attempt: read the lease and claim it if [`step`] allows. The write carries the
    /// resourceVersion that was read, so of two candidates racing, one gets a conflict and waits.
    async fn try_claim(&self) -> Result<Step, kube::Error> {
        let existing = self.api.get_opt(&self.name).await?;
        let spec = existing.as_ref().and_then(|l| l.spec.as_ref());
        let now = Timestamp::now();
        if let wait @ Step::Wait { .. } = step(spec, &self.identity, now) {
            return Ok(wait);
        }
        let spec = claimed(spec, &self.identity, now, self.timing.lease_duration);
        let result = match existing {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.api.replace(&self.name, &PostParams::default(), &lease).await
            }
        };
        match result {
            Ok(_) => Ok(Step::Claim),
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_already_exists() => {
                Ok(Step::Wait { holder: "another candidate (lost a race)".to_string() })
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn lease(holder: &str, acquired: i64, renewed: Option<i64>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(10),
            acquire_time: Some(MicroTime(at(acquired))),
            renew_time: renewed.map(|r| MicroTime(at(r))),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    #[test]
    fn step_follows_expiry() {
        let wait = |holder: &str| Step::Wait { holder: holder.to_string() };
        let cases = [
            ("no lease", None, 100, Step::Claim),
            ("released", Some(lease("", 0, Some(95), 1)), 100, Step::Claim),
            ("ours, even expired", Some(lease("me", 0, Some(10), 1)), 100, Step::Claim),
            ("theirs, fresh", Some(lease("other", 0, Some(95), 1)), 100, wait("other")),
            ("theirs, renewed exactly duration ago", Some(lease("other", 0, Some(90), 1)), 100, Step::Claim),
            ("theirs, expired", Some(lease("other", 0, Some(80), 1)), 100, Step::Claim),
            ("theirs, never renewed: acquire time counts", Some(lease("other", 95, None, 1)), 100, wait("other")),
            (
                "theirs, no times at all",
                Some(LeaseSpec { holder_identity: Some("other".into()), ..Default::default() }),
                100,
                Step::Claim,
            ),
        ];
        for (name, spec, now, want) in cases {
            assert_eq!(step(spec.as_ref(), "me", at(now)), want, "{name}");
        }
    }

    #[test]
    fn claimed_counts_transitions() {
        let duration = Duration::from_secs(30);
        let new = claimed(None, "me", at(100), duration);
        assert_eq!(
            new,
            LeaseSpec {
                holder_identity: Some("me".into()),
                lease_duration_seconds: Some(30),
                acquire_time: Some(MicroTime(at(100))),
                renew_time: Some(MicroTime(at(100))),
                lease_transitions: Some(0),
                ..Default::default()
            }
        );

        let renewed = claimed(Some(&lease("me", 50, Some(90), 3)), "me", at(100), duration);
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(50))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(100))));
        assert_eq!(renewed.lease_transitions, Some(3));

        let taken = claimed(Some(&lease("other", 50, Some(60), 3)), "me", at(100), duration);
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(100))));
        assert_eq!(taken.lease_transitions, Some(4));

        let after_release = claimed(Some(&released(&lease("other", 50, Some(60), 3))), "me", at(100), duration);
        assert_eq!(after_release.lease_transitions, Some(4));
    }
}
