//! smcore routing engine: torus-2QoS.
