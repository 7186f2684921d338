"""The sweep as jobs and stores: plan, block jobs, stores, integrity, collect, summary, status."""
