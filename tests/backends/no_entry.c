/* no_entry.c - a shared object that does not export dsv4q_backend_entry. */
int dsv4q_backend_entry_v0(void);
int dsv4q_backend_entry_v0(void) { return 0; }
