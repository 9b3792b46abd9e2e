"""NumPy references of the ops, one module per op, with the random cases and the op-against-reference
checks that the op's own tests, the fuzz tests and the hostile-input tests share."""
