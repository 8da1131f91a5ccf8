! f_atomic.F90 -- test 15: a Fortran program writing through libatomio_mpiio.so in atomic
! mode, built twice: with `use mpi` (f_atomic) and, -DF08, with `use mpi_f08` (f08_atomic).
! Every rank writes ROUNDS blocks of N integers at rank * SHIFT integers (N > SHIFT: each
! block overlaps its neighbours'), alternating MPI_File_write_at and MPI_File_write_at_all,
! each block's integers all rank * 1000 + round; then each rank reads its block back with
! MPI_File_read_at: the part it shares with each neighbour must be one write's value
! throughout (atomic writes) and its private part its own last round. The file name is an
! `atomio:` one, which ROMIO refuses: the program passes only through atomio. Rank 0 prints
!   f_atomic (use mpi): 4 ranks, 4 writes each (write_at, write_at_all): atomic
!     f_atomic atomio:PATH
program f_atomic
#ifdef F08
  use mpi_f08
  implicit none
  type(MPI_File) :: fh
  type(MPI_Status) :: st
  character(len=*), parameter :: kind = "use mpi_f08"
#else
  use mpi
  implicit none
  integer :: fh
  integer :: st(MPI_STATUS_SIZE)
  character(len=*), parameter :: kind = "use mpi"
#endif
  integer, parameter :: n = 16384, shift = 12288, rounds = 4
  integer :: buf(n), ierr, rank, nprocs, k, bad, allbad, cnt
  logical :: atomic
  integer(kind=MPI_OFFSET_KIND) :: off
  character(len=4096) :: path

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, path)
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_RDWR, &
                     MPI_INFO_NULL, fh, ierr)
  if (ierr /= MPI_SUCCESS) call fail("MPI_File_open (is libatomio_mpiio.so preloaded?)")
  call MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN, ierr)
  call MPI_File_set_atomicity(fh, .true., ierr)
  if (ierr /= MPI_SUCCESS) call fail("MPI_File_set_atomicity")
  call MPI_File_get_atomicity(fh, atomic, ierr)
  if (.not. atomic) call fail("atomic mode is off")

  off = int(rank, MPI_OFFSET_KIND) * shift * 4
  do k = 1, rounds
    buf = rank * 1000 + k
    if (mod(k, 2) == 1) then
      call MPI_File_write_at(fh, off, buf, n, MPI_INTEGER, st, ierr)
    else
      call MPI_File_write_at_all(fh, off, buf, n, MPI_INTEGER, st, ierr)
    end if
    if (ierr /= MPI_SUCCESS) call fail("MPI_File_write_at(_all)")
    call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
    if (cnt /= n) call fail("write count")
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  buf = -1
  call MPI_File_read_at(fh, off, buf, n, MPI_INTEGER, st, ierr)
  if (ierr /= MPI_SUCCESS) call fail("MPI_File_read_at")
  bad = 0
  ! shared with the left neighbour: [1, n - shift]; private: (n - shift, shift]; shared with
  ! the right one: (shift, n]. The first rank has no left one, the last no right one.
  if (rank > 0) then
    if (any(buf(1:n - shift) /= buf(1))) bad = bad + 1
    if (buf(1) /= (rank - 1) * 1000 + rounds .and. buf(1) /= rank * 1000 + rounds) bad = bad + 1
  end if
  if (any(buf(n - shift + 1:shift) /= rank * 1000 + rounds)) bad = bad + 1
  if (rank < nprocs - 1) then
    if (any(buf(shift + 1:n) /= buf(n))) bad = bad + 1
    if (buf(n) /= (rank + 1) * 1000 + rounds .and. buf(n) /= rank * 1000 + rounds) bad = bad + 1
  end if
  call MPI_File_close(fh, ierr)
  if (ierr /= MPI_SUCCESS) call fail("MPI_File_close")
  call MPI_Allreduce(bad, allbad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (allbad == 0) then
      print '(a,a,a,i0,a,i0,a)', "f_atomic (", kind, "): ", nprocs, " ranks, ", rounds, &
            " writes each (write_at, write_at_all): atomic"
    else
      print '(a,a,a,i0,a)', "f_atomic (", kind, "): ", allbad, " mixed regions: NOT atomic"
    end if
  end if
  call MPI_Finalize(ierr)
  if (allbad /= 0) error stop 'f_atomic: not atomic'

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    integer :: e
    print '(a,i0,a,a)', "FAIL rank ", rank, ": ", what
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine fail

end program f_atomic
