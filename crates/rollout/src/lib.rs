//! The node controller's decisions, as pure functions over the objects it reads (§3 of the
//! behaviour spec): [`membership`] (which pool owns a node), [`node`] (state predicates from the
//! daemon's annotations and the node's conditions), [`plan`] (maxUnavailable, which nodes to
//! target next, the UpdateInProgress taint), [`status`] (pool counts and conditions, set by
//! upstream's rules in [`conditions`]), [`drain`] (drain requests, the pods a drain evicts,
//! retries and warnings).
//! The controller fetches, calls these, and writes what they return.

pub mod conditions;
pub mod drain;
pub mod membership;
pub mod node;
pub mod plan;
pub mod status;

pub use membership::{MembershipError, nodes_for_pool, pools_for_node};
pub use plan::{Plan, PlanError, max_unavailable, plan};
pub use status::calculate_status;
