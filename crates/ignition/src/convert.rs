//! Conversion between Ignition spec versions (placeholder until the converter lands).
