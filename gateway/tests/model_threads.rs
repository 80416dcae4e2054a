//! `mcc_search::local::settle_threads`: the thread count of the model's matrix products is
//! settled once from the CPUs this process may use, and an operator's own value is kept.
//! Alone in its test binary: it sets an environment variable, which no other test may be
//! reading at the same time.
#![cfg(feature = "embed-local")]

use mcc_search::local::settle_threads;

const VAR: &str = "RAYON_NUM_THREADS";

#[test]
fn the_thread_count_is_the_available_cpus_unless_the_operator_set_one() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    // SAFETY: the only test of this binary; nothing else reads the environment now.
    unsafe {
        std::env::remove_var(VAR);
        settle_threads();
    }
    assert_eq!(std::env::var(VAR).unwrap(), cpus.to_string());

    let chosen = (cpus + 3).to_string();
    // SAFETY: as above.
    unsafe {
        std::env::set_var(VAR, &chosen);
        settle_threads();
    }
    assert_eq!(
        std::env::var(VAR).unwrap(),
        chosen,
        "an operator's value is kept"
    );
}
