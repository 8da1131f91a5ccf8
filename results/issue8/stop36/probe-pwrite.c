#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  int P=atoi(argv[1]); size_t per=(size_t)64<<20; size_t chunk=4<<20;
  const char*path=argv[2]; unlink(path);
  int fd=open(path,O_RDWR|O_CREAT,0644);
  char*buf=malloc(per); memset(buf,7,per);
  double t0=now();
  if(P==0){ // one process writes all 4 regions
    for(int r=0;r<4;r++) for(size_t o=0;o<per;o+=chunk) pwrite(fd,buf+o,chunk,r*per+o);
  } else {
    for(int r=0;r<P;r++) if(!fork()){ for(int k=0;k<4/P;k++){size_t base=(r*(4/P)+k)*per; for(size_t o=0;o<per;o+=chunk) pwrite(fd,buf+o,chunk,base+o);} _exit(0);}
    for(int r=0;r<P;r++) wait(0);
  }
  double t=now()-t0; printf("P=%d %.0f MiB/s\n",P,256/t);
  close(fd); unlink(path); return 0;}
