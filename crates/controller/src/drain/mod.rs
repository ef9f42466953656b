//! The drain controller (upstream `pkg/controller/drain`): carries out the drain and uncordon
//! requests node daemons make through their `desiredDrain` annotation, and acknowledges each in
//! `lastAppliedDrain`. What a request is, which pods go and how failures are retried are
//! `mco_rollout::drain`'s decisions; [`controller`] does the requests.

pub mod controller;
