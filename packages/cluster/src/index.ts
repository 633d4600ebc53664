/** `@cairn/cluster`: import its modules by path (`@cairn/cluster/<Module>`); nothing here is loaded by the embedded default. */
export {}
