//! The Machine Config Server's metrics (the original's server has none).
