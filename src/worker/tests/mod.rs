//! The worker's unit tests by concern: `hostile_plan` (the hostile plans of tests/kernels, refused
//! on their lines), `plan_fuzz` (random and mutated plans through both processes); the tests of
//! `mod.rs` itself below.

mod hostile_plan;
mod plan_fuzz;

#[test]
fn this_machine_has_a_name() {
    assert!(!super::hostname().is_empty());
}
