//! smcore routing engine: Nue (deadlock-free routing in the complete CDG).
