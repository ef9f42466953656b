//! The node controller's decisions, as pure functions over the objects it reads
//! (`docs/concepts/rollouts.md`): [`membership`] (which pool owns a node), [`node`] (state
//! predicates from the daemon's annotations and the node's conditions), [`layering`] (whether a
//! layered pool's image build is ready), [`plan`] (maxUnavailable, which nodes to target next, the
//! UpdateInProgress taint), [`masters`] (control-plane schedulability), [`policy`] (mco's canaries,
//! soak, halt and maintenance windows), [`prestage`] (pulling a new OS image ahead of the update
//! slots), [`arbiter`] (master and arbiter pools updating together), [`status`] (pool counts and
//! conditions, set by upstream's rules in [`conditions`]), [`drain`] (drain requests, the pods a
//! drain evicts, retries and warnings). The controller fetches, calls these, and writes what they
//! return.

pub mod arbiter;
pub mod conditions;
pub mod drain;
pub mod layering;
pub mod masters;
pub mod membership;
pub mod node;
pub mod plan;
pub mod policy;
pub mod prestage;
pub mod status;

pub use membership::{MembershipError, nodes_for_pool, pools_for_node};
pub use plan::{Inputs, Plan, PlanError, max_unavailable, plan};
pub use status::calculate_status;
