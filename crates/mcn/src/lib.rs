//! MachineConfigNode, one per Node: where the node is in its update, as conditions. The daemon
//! writes the conditions of its own steps, the drain controller those of cordon, drain and
//! uncordon, and the node controller keeps the spec (node, pool, desired config) of every Node.
//! [`progress`] is the pure logic; [`writer`] reads and writes the objects.

pub mod progress;
pub mod writer;

pub use progress::{Phase, Status, Step};
pub use writer::Recorder;
