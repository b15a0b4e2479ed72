//! Tests of the binding.
