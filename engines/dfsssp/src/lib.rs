//! smcore routing engine: OpenSM's SSSP and DFSSSP algorithms.
