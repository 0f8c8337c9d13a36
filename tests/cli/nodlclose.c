/* Preloaded into the ranks of the MPI tests under ASan (tests/cli/mpi.sh):
 * a dlclose that keeps the library loaded, so that the allocations
 * OpenMPI's plugins keep until exit still have a module LeakSanitizer can
 * name (tests/cli/lsan-openmpi.supp) after MPI_Finalize has closed them. */
int dlclose(void *handle);

int dlclose(void *handle)
{
	(void)handle;
	return 0;
}
