//! mco's own rollout policy of a pool (none of it upstream's): canaries updated first and left
//! to soak, a halt after too many failed nodes, and maintenance windows outside which no node
//! starts an update. Set as annotations on the MachineConfigPool under `mco.dev/` (the API
//! server would prune unknown fields of upstream's kind); without them a pool rolls out as
//! upstream's does. Parsed and validated here ([`RolloutPolicy::from_pool`]); [`hold`] decides,
//! without IO, what holds a pool's next nodes back.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::civil::Time;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};
use k8s_openapi::api::core::v1::Node;
use mco_api::MachineConfigPool;
use mco_api::constants::{STATE_ANNOTATION, STATE_DEGRADED, STATE_UNRECONCILABLE};

use crate::node;

/// How many nodes are canaries: a count (`"1"`) or a percentage of the pool (`"20%"`, at least
/// one node), the first by name.
pub const CANARY_ANNOTATION: &str = "mco.dev/canary";
/// Which nodes are canaries: labels, `key=value` or `key` (present), comma-separated, all must
/// match. Not together with [`CANARY_ANNOTATION`].
pub const CANARY_SELECTOR_ANNOTATION: &str = "mco.dev/canary-selector";
/// How long the canaries stay Done and Ready on a new config before the other nodes follow
/// (`"30m"`, `"1h 30m"`, `"PT2H"`); without it, none.
pub const CANARY_SOAK_ANNOTATION: &str = "mco.dev/canary-soak";
/// After this many nodes failed moving to a config, the pool is paused (`spec.paused`).
pub const HALT_AFTER_FAILURES_ANNOTATION: &str = "mco.dev/halt-after-failures";
/// When node updates may start: `DAYS HH:MM-HH:MM` entries separated by `;`, DAYS a
/// comma-separated list of days or day ranges (`Mon-Fri`, `Sat,Sun`); a window whose end is not
/// after its start ends the next day; `24:00` is the end of the day.
pub const MAINTENANCE_WINDOWS_ANNOTATION: &str = "mco.dev/maintenance-windows";
/// The IANA time zone of the windows (`Europe/Berlin`); UTC without it.
pub const MAINTENANCE_TIME_ZONE_ANNOTATION: &str = "mco.dev/maintenance-time-zone";
/// Written by the controller: `<config> <RFC 3339 time>`, when the canaries were all Done and
/// Ready on that config (the soak's start).
pub const CANARIES_DONE_ANNOTATION: &str = "mco.dev/canaries-done";
/// Written by the controller: the config the pool was halted on. A pool resumed by hand on the
/// same config is not halted again for it.
pub const HALTED_ON_ANNOTATION: &str = "mco.dev/halted-on";

/// A policy annotation that cannot be used; the pool reports it and no node is moved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MachineConfigPool {pool}: annotation {annotation}: {message}")]
pub struct PolicyError {
    pub pool: String,
    pub annotation: &'static str,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Canaries {
    Count(usize),
    Percent(usize),
    /// `(key, value)` pairs; `None`: the label must be present.
    Selector(Vec<(String, Option<String>)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RolloutPolicy {
    pub canaries: Option<Canaries>,
    pub soak: Duration,
    pub halt_after: Option<usize>,
    pub windows: Option<Windows>,
}

/// Weekly windows in a time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct Windows {
    pub zone: TimeZone,
    pub windows: Vec<Window>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Days the window starts on, Monday first.
    pub days: [bool; 7],
    pub start: Time,
    /// The end: on the start day if after `start`, else the next day (`None`: midnight).
    pub end: Option<Time>,
}

impl RolloutPolicy {
    /// The pool's policy, `None` when it sets none of the annotations.
    pub fn from_pool(pool: &MachineConfigPool) -> Result<Option<RolloutPolicy>, PolicyError> {
        let annotations = pool.metadata.annotations.clone().unwrap_or_default();
        let name = pool.metadata.name.clone().unwrap_or_default();
        let error = |annotation, message: String| PolicyError { pool: name.clone(), annotation, message };
        let get = |key: &str| annotations.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let canaries = match (get(CANARY_ANNOTATION), get(CANARY_SELECTOR_ANNOTATION)) {
            (Some(_), Some(_)) => {
                return Err(error(
                    CANARY_SELECTOR_ANNOTATION,
                    format!("set either {CANARY_ANNOTATION} or {CANARY_SELECTOR_ANNOTATION}, not both"),
                ));
            }
            (Some(count), None) => Some(parse_count(count).map_err(|m| error(CANARY_ANNOTATION, m))?),
            (None, Some(selector)) => Some(parse_selector(selector).map_err(|m| error(CANARY_SELECTOR_ANNOTATION, m))?),
            (None, None) => None,
        };
        let soak = match get(CANARY_SOAK_ANNOTATION) {
            Some(text) => parse_duration(text).map_err(|m| error(CANARY_SOAK_ANNOTATION, m))?,
            None => Duration::ZERO,
        };
        if !soak.is_zero() && canaries.is_none() {
            return Err(error(
                CANARY_SOAK_ANNOTATION,
                format!("a soak needs canaries ({CANARY_ANNOTATION} or {CANARY_SELECTOR_ANNOTATION})"),
            ));
        }
        let halt_after = match get(HALT_AFTER_FAILURES_ANNOTATION) {
            Some(text) => Some(
                digits_only(text)
                    .and_then(|d| d.parse::<usize>().ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| error(HALT_AFTER_FAILURES_ANNOTATION, format!("{text:?} is not a number ≥ 1")))?,
            ),
            None => None,
        };
        let zone = match get(MAINTENANCE_TIME_ZONE_ANNOTATION) {
            Some(name) => Some(
                TimeZone::get(name)
                    .map_err(|_| error(MAINTENANCE_TIME_ZONE_ANNOTATION, format!("unknown time zone {name:?}")))?,
            ),
            None => None,
        };
        let windows = match get(MAINTENANCE_WINDOWS_ANNOTATION) {
            Some(text) => Some(Windows {
                zone: zone.unwrap_or(TimeZone::UTC),
                windows: parse_windows(text).map_err(|m| error(MAINTENANCE_WINDOWS_ANNOTATION, m))?,
            }),
            None if zone.is_some() => {
                return Err(error(
                    MAINTENANCE_TIME_ZONE_ANNOTATION,
                    format!("a time zone needs windows ({MAINTENANCE_WINDOWS_ANNOTATION})"),
                ));
            }
            None => None,
        };
        let policy = RolloutPolicy { canaries, soak, halt_after, windows };
        Ok((policy != RolloutPolicy::default()).then_some(policy))
    }
}

impl Default for RolloutPolicy {
    fn default() -> Self {
        RolloutPolicy { canaries: None, soak: Duration::ZERO, halt_after: None, windows: None }
    }
}

fn parse_count(text: &str) -> Result<Canaries, String> {
    let number = |digits: &str| digits_only(digits).and_then(|d| d.parse::<usize>().ok()).filter(|n| *n >= 1);
    match text.strip_suffix('%') {
        Some(percent) => match number(percent) {
            Some(p) if p <= 100 => Ok(Canaries::Percent(p)),
            _ => Err(format!("{text:?} is not a percentage from 1% to 100%")),
        },
        None => {
            number(text).map(Canaries::Count).ok_or_else(|| format!("{text:?} is not a number ≥ 1 or a percentage"))
        }
    }
}

/// `text` if it is ASCII digits only (no sign, no spaces).
fn digits_only(text: &str) -> Option<&str> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then_some(text)
}

fn parse_selector(text: &str) -> Result<Canaries, String> {
    // Label keys ([prefix/]name) and values: letters, digits, `-`, `_`, `.` (and `/` in a key).
    let label = |s: &str, slash: bool| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c) || (slash && c == '/'))
    };
    let mut labels = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (key, value) = match part.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (part, None),
        };
        if !label(key, true) || value.is_some_and(|v| !v.is_empty() && !label(v, false)) {
            return Err(format!("{part:?} is not key=value or key (label syntax)"));
        }
        labels.push((key.to_string(), value.map(str::to_string)));
    }
    Ok(Canaries::Selector(labels))
}

/// The longest soak: a year.
const MAX_SOAK: Duration = Duration::from_secs(365 * 24 * 3600);

fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed: SignedDuration =
        text.parse().map_err(|_| format!("{text:?} is not a duration (e.g. \"30m\", \"1h 30m\", \"PT2H\")"))?;
    let duration = Duration::try_from(parsed).map_err(|_| format!("{text:?} is negative"))?;
    if duration > MAX_SOAK {
        return Err(format!("{text:?} is longer than a year"));
    }
    Ok(duration)
}

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

fn parse_windows(text: &str) -> Result<Vec<Window>, String> {
    text.split(';')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(parse_window)
        .collect::<Result<Vec<_>, _>>()
        .and_then(|windows| if windows.is_empty() { Err("no window".to_string()) } else { Ok(windows) })
}

fn parse_window(text: &str) -> Result<Window, String> {
    let syntax = || format!("{text:?} is not \"DAYS HH:MM-HH:MM\" (e.g. \"Mon-Fri 22:00-06:00\")");
    let (days, hours) = text.split_once(char::is_whitespace).ok_or_else(syntax)?;
    let (start, end) = hours.trim().split_once('-').ok_or_else(syntax)?;
    let day = |name: &str| {
        DAYS.iter()
            .position(|d| d.eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| format!("{text:?}: {:?} is not a day ({})", name.trim(), DAYS.join(", ")))
    };
    let mut on = [false; 7];
    for part in days.split(',') {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (day(first)?, day(last)?);
                let mut d = first;
                loop {
                    on[d] = true;
                    if d == last {
                        break;
                    }
                    d = (d + 1) % 7;
                }
            }
            None => on[day(part)?] = true,
        }
    }
    let time = |t: &str| -> Result<Option<Time>, String> {
        let t = t.trim();
        if t == "24:00" {
            return Ok(None);
        }
        let (h, m) = t.split_once(':').ok_or_else(syntax)?;
        let valid = h.len() == 2 && m.len() == 2 && digits_only(h).is_some() && digits_only(m).is_some();
        match (h.parse::<i8>(), m.parse::<i8>()) {
            (Ok(h), Ok(m)) if valid && (0..24).contains(&h) && (0..60).contains(&m) => {
                Ok(Some(Time::new(h, m, 0, 0).expect("in range")))
            }
            _ => Err(format!("{text:?}: {t:?} is not a time from 00:00 to 24:00")),
        }
    };
    let start = time(start)?.ok_or_else(|| format!("{text:?}: a window cannot start at 24:00"))?;
    let end = time(end)?;
    if end == Some(start) {
        return Err(format!("{text:?}: a window needs a length (start and end are equal)"));
    }
    Ok(Window { days: on, start, end })
}

impl Windows {
    /// The intervals of every window starting from the day before `now`'s date up to a week and
    /// a day after it, in time order.
    fn intervals(&self, now: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let today = now.to_zoned(self.zone.clone()).date();
        let mut intervals = Vec::new();
        for offset in -1..=8 {
            let Ok(date) = today.checked_add(jiff::Span::new().days(offset)) else { continue };
            let weekday = date.weekday().to_monday_zero_offset() as usize;
            for w in self.windows.iter().filter(|w| w.days[weekday]) {
                let at = |date: jiff::civil::Date, time: Time| date.to_datetime(time).to_zoned(self.zone.clone());
                let Ok(start) = at(date, w.start) else { continue };
                let end_date = match w.end {
                    Some(end) if end > w.start => at(date, end),
                    Some(end) => date.tomorrow().and_then(|d| at(d, end)),
                    None => date.tomorrow().and_then(|d| at(d, Time::midnight())),
                };
                // A window wholly inside a skipped hour (summer time) is no window.
                if let Ok(end) = end_date
                    && start.timestamp() < end.timestamp()
                {
                    intervals.push((start.timestamp(), end.timestamp()));
                }
            }
        }
        intervals.sort();
        intervals
    }

    /// Whether `now` is inside a window.
    pub fn is_open(&self, now: Timestamp) -> bool {
        self.intervals(now).iter().any(|(start, end)| *start <= now && now < *end)
    }

    /// When the next window opens after `now`, in the windows' time zone.
    pub fn next_opening(&self, now: Timestamp) -> Option<Zoned> {
        self.intervals(now)
            .into_iter()
            .map(|(start, _)| start)
            .find(|start| *start > now)
            .map(|start| start.to_zoned(self.zone.clone()))
    }
}

/// The canaries among `nodes`, by name.
pub fn canaries(canaries: &Canaries, nodes: &[&Node]) -> BTreeSet<String> {
    let mut names: Vec<&str> = nodes.iter().map(|n| node::name(n)).collect();
    names.sort();
    let first = |count: usize| names.iter().take(count).map(|n| n.to_string()).collect();
    match canaries {
        Canaries::Count(count) => first(*count),
        Canaries::Percent(percent) => first((percent * names.len()).div_ceil(100).max(1)),
        Canaries::Selector(labels) => nodes
            .iter()
            .filter(|n| {
                let node_labels = n.metadata.labels.as_ref();
                labels.iter().all(|(key, value)| match node_labels.and_then(|l| l.get(key)) {
                    Some(v) => value.as_ref().is_none_or(|want| want == v),
                    None => false,
                })
            })
            .map(|n| node::name(n).to_string())
            .collect(),
    }
}

/// What holds a pool's next nodes back this sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Only these nodes (the canaries not yet on the target) may start.
    Canaries(BTreeSet<String>),
    /// The canaries are on the target: the others wait until `until`. `started`: the soak starts
    /// in this sync (the controller records it), lasting `length`.
    Soak { until: Timestamp, started: Option<Timestamp>, length: SignedDuration },
    /// No node starts before the window opening at this time.
    Window(Option<Zoned>),
    /// Too many nodes failed moving to the target: the pool is paused.
    Halt(Vec<String>),
    /// The policy cannot be used (or does not fit the pool): no node starts.
    Invalid(String),
}

impl Hold {
    /// The message the pool shows. It changes only when the hold does, so that the pool's
    /// condition is not rewritten at every sync.
    pub fn message(&self, target: &str) -> String {
        match self {
            Hold::Canaries(nodes) => format!(
                "updating canaries first: {} to {target}",
                nodes.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
            ),
            Hold::Soak { started: Some(_), length, .. } => {
                format!("canaries are on {target}: soaking for {length:#}")
            }
            Hold::Soak { until, .. } => format!("canaries are on {target}: soaking until {until}"),
            Hold::Window(Some(opens)) => format!("waiting for maintenance window (opens at {opens})"),
            Hold::Window(None) => "waiting for maintenance window (none in the coming week)".to_string(),
            Hold::Halt(failed) => format!(
                "halted: {} failed updating to {target}; fix or revert the change, then resume the pool \
                 (spec.paused: false)",
                failed.join(", ")
            ),
            Hold::Invalid(message) => message.clone(),
        }
    }

    /// The condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Hold::Canaries(_) => "Canaries",
            Hold::Soak { .. } => "CanarySoak",
            Hold::Window(_) => "MaintenanceWindow",
            Hold::Halt(_) => "Halted",
            Hold::Invalid(_) => "InvalidPolicy",
        }
    }

    /// When the hold ends by itself, for a sync then.
    pub fn ends_at(&self) -> Option<Timestamp> {
        match self {
            Hold::Soak { until, .. } => Some(*until),
            Hold::Window(opens) => opens.as_ref().map(Zoned::timestamp),
            _ => None,
        }
    }
}

/// What the policy's records on the pool are keyed by: the config, and the image of a layered
/// pool (an image-only change is a new rollout).
pub fn record_key(target: &node::Target) -> String {
    match &target.image {
        Some(image) => format!("{}@{image}", target.config),
        None => target.config.clone(),
    }
}

/// The controller's records on `pool` that are about another target than `target`: stale, to
/// be removed (a config rendered again later must soak, and may halt, again).
pub fn stale_records(pool: &MachineConfigPool, target: &node::Target) -> Vec<&'static str> {
    let annotations = pool.metadata.annotations.as_ref();
    let key = record_key(target);
    let record = |name: &'static str| {
        let value = annotations.and_then(|a| a.get(name))?;
        let recorded = value.split_once(' ').map_or(value.as_str(), |(key, _)| key);
        (recorded != key).then_some(name)
    };
    [CANARIES_DONE_ANNOTATION, HALTED_ON_ANNOTATION].into_iter().filter_map(record).collect()
}

/// Nodes that failed moving to `target` (Degraded or Unreconcilable while targeted at it).
fn failed_on(nodes: &[&Node], target: &node::Target) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            node::desired_equals(n, target)
                && !node::is_done(n, target)
                && matches!(node::annotation(n, STATE_ANNOTATION), Some(STATE_DEGRADED | STATE_UNRECONCILABLE))
        })
        .map(|n| node::name(n).to_string())
        .collect()
}

/// What holds the pool's next nodes back, if anything, at `now`, with `target` its config; the
/// controller's records are the pool's annotations. A policy that does not fit the pool (more
/// canaries than nodes, a selector matching none) holds every node while some are behind.
pub fn hold(
    pool: &MachineConfigPool,
    policy: &RolloutPolicy,
    nodes: &[&Node],
    target: &node::Target,
    now: Timestamp,
) -> Option<Hold> {
    let annotations: BTreeMap<String, String> = pool.metadata.annotations.clone().unwrap_or_default();
    let key = record_key(target);
    if let Some(limit) = policy.halt_after {
        let failed = failed_on(nodes, target);
        let resumed = annotations.get(HALTED_ON_ANNOTATION) == Some(&key);
        if failed.len() >= limit && !resumed {
            return Some(Hold::Halt(failed));
        }
    }
    if nodes.iter().all(|n| node::is_done(n, target)) {
        return None;
    }
    // No node starts outside a window, canaries included.
    if let Some(windows) = &policy.windows
        && !windows.is_open(now)
    {
        return Some(Hold::Window(windows.next_opening(now)));
    }
    let Some(canaries_spec) = &policy.canaries else { return None };
    let chosen = canaries(canaries_spec, nodes);
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let invalid =
        |annotation, message| Hold::Invalid(PolicyError { pool: pool_name.clone(), annotation, message }.to_string());
    match canaries_spec {
        Canaries::Count(count) if *count > nodes.len() => {
            return Some(invalid(
                CANARY_ANNOTATION,
                format!("{count} canaries, but the pool has {} nodes", nodes.len()),
            ));
        }
        Canaries::Selector(_) if chosen.is_empty() => {
            return Some(invalid(CANARY_SELECTOR_ANNOTATION, "no node of the pool matches".to_string()));
        }
        _ => {}
    }
    let on_target =
        |name: &String| nodes.iter().any(|n| node::name(n) == name && node::is_done(n, target) && node::is_ready(n));
    let pending: BTreeSet<String> = chosen.iter().filter(|n| !on_target(n)).cloned().collect();
    let rest_pending = nodes.iter().any(|n| !chosen.contains(node::name(n)) && !node::is_done(n, target));
    if !rest_pending {
        return None;
    }
    if !pending.is_empty() {
        return Some(Hold::Canaries(pending));
    }
    if policy.soak.is_zero() {
        return None;
    }
    let recorded = annotations.get(CANARIES_DONE_ANNOTATION).and_then(|r| {
        let (recorded_key, at) = r.split_once(' ')?;
        (recorded_key == key).then(|| at.parse::<Timestamp>().ok()).flatten()
    });
    let (since, started) = match recorded {
        Some(at) => (at, None),
        None => (now, Some(now)),
    };
    let length = SignedDuration::try_from(policy.soak).unwrap_or(SignedDuration::MAX);
    // A soak past the end of time never ends.
    let until = since.checked_add(length).unwrap_or(Timestamp::MAX);
    (now < until).then_some(Hold::Soak { until, started, length })
}

/// The pool condition mco's rollout policy sets (mco's own type).
pub const ROLLOUT_HELD: &str = "RolloutHeld";

/// The pool's [`ROLLOUT_HELD`] condition at `now`: `(held, reason, message)`, or `None` for a
/// pool without a policy (which keeps upstream's conditions only; `had_condition`: it had one
/// once, which is then set to False).
pub fn condition(
    pool: &MachineConfigPool,
    nodes: &[&Node],
    target: &node::Target,
    now: Timestamp,
    had_condition: bool,
) -> Option<(bool, &'static str, String)> {
    let annotations = pool.metadata.annotations.as_ref();
    let halted = annotations.and_then(|a| a.get(HALTED_ON_ANNOTATION)) == Some(&record_key(target));
    if pool.spec.paused == Some(true) {
        if !halted {
            return had_condition.then(|| (false, "", String::new()));
        }
        let halt = Hold::Halt(failed_on(nodes, target));
        return Some((true, halt.reason(), halt.message(&target.config)));
    }
    let held = match RolloutPolicy::from_pool(pool) {
        Ok(None) => return had_condition.then(|| (false, "", String::new())),
        Ok(Some(policy)) => hold(pool, &policy, nodes, target, now),
        Err(e) => Some(Hold::Invalid(e.to_string())),
    };
    Some(match held {
        Some(hold) => (true, hold.reason(), hold.message(&target.config)),
        None => (false, "", String::new()),
    })
}

#[cfg(test)]
mod tests;
