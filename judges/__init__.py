"""Gate judges: a shadow judge per gate, its agreement with people, and delegation it earns."""
