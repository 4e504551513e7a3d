//! smcore routing engine: OpenSM's fat-tree (ftree) algorithm.
