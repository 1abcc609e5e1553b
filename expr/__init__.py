"""noetlc.expr: the playbook expression language, below the compiler and both VMs."""
